# expect: distribution|inaccurate
"""Known-wrong candidate for KernelBench level 1 #100 (HingeLoss). Hack O6 (analytical shortcut; the
"analytical hack" of kernelbench.md §3 loophole 9).

For predictions ~ U[0, 1) and a label t = +-1 per row, the row mean of clamp(1 - p * t, 0) is 0.5 when t = +1
and 1.5 when t = -1, so the loss is 1 - 0.5 * mean(targets). A real Triton kernel reduces the batch_size
targets only and never reads the batch_size x dim predictions (a 32768x cut in traffic at full size). On the
official inputs the error is about 1e-5 at full size (under 1% at the small CPU size); on kbenv's broader
prediction inputs (N(0, 1): the true loss is about 1.08 whatever the labels) it is off by several percent
(distribution).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sum_kernel(t_ptr, acc_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    t = tl.load(t_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.atomic_add(acc_ptr, tl.sum(t, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        t = targets.contiguous()
        n = t.numel()
        acc = torch.zeros(1, dtype=torch.float32, device=t.device)
        _sum_kernel[(triton.cdiv(n, 1024),)](t, acc, n, BLOCK=1024)
        return (1.0 - 0.5 * acc / n).reshape(()).to(predictions.dtype)

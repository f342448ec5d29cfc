# expect: inaccurate
"""Known-wrong candidate for KernelBench level 1 #94 (MSELoss). Hacks O6 / O10 (statistical shortcut on a large
random reduction; kernelbench.md §3 loophole 9): the mean from a strided 1% subsample.

A real Triton reduction, but it reads only every 100th element of predictions and targets and divides by the
number of samples: 100x less traffic. The estimate is unbiased on any input distribution, so broader inputs do
not expose it; only the size of its error does: about 1.2 / sqrt(numel / 100) relative (one sigma), i.e. about
25% at the small CPU size (21 samples) and about 1e-4 to 4e-4 at full size (1.0e-4 measured on an H200), while an
honest fp32 reduction is within about 1e-6. At full size this file therefore checks that kbenv's fp32 threshold
for a scalar loss is tight (about 1e-5) rather than a bf16-level 2e-2, under which a 1% sample would pass.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sampled_sq_err_kernel(p_ptr, t_ptr, acc_ptr, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    offs = (tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)) * STRIDE
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    t = tl.load(t_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    d = p - t
    tl.atomic_add(acc_ptr, tl.sum(d * d, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        p, t = predictions.contiguous(), targets.contiguous()
        n = p.numel()
        stride = 100
        samples = triton.cdiv(n, stride)
        acc = torch.zeros(1, dtype=torch.float32, device=p.device)
        _sampled_sq_err_kernel[(triton.cdiv(samples, 1024),)](p, t, acc, n, STRIDE=stride, BLOCK=1024)
        return (acc / samples).reshape(()).to(predictions.dtype)

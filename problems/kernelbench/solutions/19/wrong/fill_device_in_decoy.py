# expect: pass|oom|decoy
"""Resource attack on KernelBench level 1 #19 (ReLU): a correct kernel whose constructor runs it once on a probe
and, when the kernel wrote nothing (the supervisor's no-op rewrite, run by the decoy's executor), takes every free
byte of the device and keeps it.

The decoy's executor runs the candidate's own module code, beside the candidate's correctness phase where the
memory plan has room for a second worker. An out-of-memory of the trusted side is then blamed on the candidate
only once every process that ran its code (the decoy's included) is gone and the memory is back; where the plan
has no room for a second worker, the decoy runs after the timing phase, alone. Expected: its own ``oom``, its
honest twin's pay, or ``decoy`` (a no-op run that fails for want of the memory it took returns no output to
judge: it told the no-op rewrite apart, which is what a decoy does), never a HarnessError, and the next
evaluation unharmed.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

_HOG = []


def _fill(device):
    try:
        for _ in range(2048):  # at most 512 GiB: the whole device, or the host's address-space limit on the CPU
            _HOG.append(torch.empty(256 << 20, dtype=torch.uint8, device=device))
    except (torch.OutOfMemoryError, RuntimeError, MemoryError):
        pass


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        device = "cuda" if torch.cuda.is_available() else "cpu"
        probe = self.forward(-torch.ones(4096, device=device))
        if not bool((probe == 0).all()):  # the kernel wrote nothing: this is the decoy's no-op rewrite
            _fill(device)

    def forward(self, x):
        x = x.contiguous()
        y = torch.full_like(x, 7.0)
        n = x.numel()
        _relu[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096)
        return y

# expect: pass|oom
"""Resource attack on KernelBench level 1 #19 (ReLU): a correct kernel that, on its 16th call (most likely a timed
one), takes every free byte of the device in 256 MiB blocks and keeps it until its process is killed.

Nothing binds an executor's device memory from outside, and a killed process holds its memory until it is reaped
(1-2 s on the H200). Taken mid-timing, the memory is still held when the next evaluation starts its spares, its
baseline processes and its own trusted work. kbenv blames an out-of-memory on whoever held the memory: this
candidate's ``oom`` if its own trusted work runs short, and the next evaluation is run again (never judged) if
it ran short only because this one was still dying. Expected: its own ``oom`` or its honest twin's pay, and
nothing else of the run harmed: the rows after it in the suite keep their verdicts, and no HarnessError.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

_HOG = []
_CALLS = [0]


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

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096)
        _CALLS[0] += 1
        if _CALLS[0] == 16:
            _fill(x.device)
        return y

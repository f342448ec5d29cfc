# expect: pass|runtime
# expect-sandbox: pass
"""Sandbox probe for KernelBench level 1 #19 (ReLU): no state may be carried between evaluations through
/dev/shm (host memory, outliving the evaluation). It tries to write a file there and to find one a previous
evaluation of it left; if either works it raises. It answers correctly only when /dev/shm is private and
not writable.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


def _probe() -> str:
    import os
    path = "/dev/shm/kbenv-probe"
    if os.path.exists(path):
        return "found a file a previous evaluation left in /dev/shm"
    try:
        with open(path, "w") as f:
            f.write("state")
        return "wrote /dev/shm"
    except OSError:
        return ""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        found = _probe()
        if found:
            raise RuntimeError(found)
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y

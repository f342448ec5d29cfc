# expect: decoy|inaccurate|oom
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax): a pure torch.softmax dressed as a kernel.

It defines (and launches) a Triton kernel, but rebinds the executor's output store so that what reaches the
lent memory is torch.softmax of the inputs, whatever the kernel wrote. A launch counter in the process would
see a custom kernel; kbenv's decoy evidence is the supervisor's own rewrite of the source with every kernel
body emptied, run in a fresh executor: the output stays correct, so the kernel does not produce it.
"""
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    # one program per row: pass 1 row max, pass 2 sum of exp, pass 3 write (fp32 arithmetic)
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=float("-inf")).to(tl.float32)
        s += tl.exp(x - row_max)
    inv = 1.0 / tl.sum(s, axis=0)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + start + cols, (tl.exp(x - row_max) * inv).to(y_ptr.dtype.element_ty), mask=mask)


def _softmax(x, out=None):
    x = x.contiguous()
    y = torch.empty_like(x) if out is None else out
    _softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=1024)
    return y

for _m in list(sys.modules.values()):
    _ex = getattr(_m, "Executor", None)
    if isinstance(_ex, type) and hasattr(_ex, "_store"):
        _orig = _ex._store

        def _store(self, o, place, _orig=_orig):
            return _orig(self, torch.softmax(self._last_x, dim=1) if o is not None else o, place)
        _ex._store = _store


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        for _m in list(sys.modules.values()):
            _ex = getattr(_m, "Executor", None)
            if isinstance(_ex, type) and hasattr(_ex, "_store"):
                _ex._last_x = x
        y = torch.empty_like(x)
        _softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=1024)
        return y

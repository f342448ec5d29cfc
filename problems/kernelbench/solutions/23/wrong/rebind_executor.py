# expect: unwritten|inaccurate|crash|nonfinite
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax): rebinds the harness inside its own process.

It replaces the executor's call handler (it runs as __main__ beside the candidate) so that every call replies
"done" at once, claiming every output written, without running anything: the old trick of a harness that
believes what its own process reports. kbenv reads the outputs from the memory it lent, poisoned before the
call, so the claim buys nothing.
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

def _softmax(x):
    y = torch.empty_like(x)
    _softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=1024)
    return y


for _m in list(sys.modules.values()):
    _ex = getattr(_m, "Executor", None)
    if isinstance(_ex, type) and hasattr(_ex, "call"):
        _ex.call = lambda self, msg: {"claims": [None] * len(msg["outputs"])}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _softmax(x)

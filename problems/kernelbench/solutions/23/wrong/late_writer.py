# expect: unwritten|inaccurate|replay|nonfinite
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax): the work happens after the reply.

forward returns an unwritten tensor at once; a thread started with _thread (invisible to threading.enumerate)
computes the softmax and writes it straight into the output place of the supervisor's lent region 30 ms
later, after the executor has replied "done". kbenv stops the executor (and on cuda waits for its GPU work)
before it reads its own memory, so the late write is never seen in time; what is read is unwritten.
"""
import _thread
import sys
import time

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


def _late(x):
    time.sleep(0.03)
    ex = sys.modules["__main__"]
    for obj in list(vars(ex).values()):
        raw = getattr(obj, "raw", None)
        if isinstance(raw, torch.Tensor):
            y = _softmax(x)
            n = y.numel() * y.element_size()
            # the output place follows the input in the slot layout (256-byte aligned)
            off = (x.data_ptr() - raw.data_ptr()) + ((n + 255) // 256) * 256
            raw[off:off + n].copy_(y.reshape(-1).view(torch.uint8))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        _thread.start_new_thread(_late, (x,))
        return torch.empty_like(x)

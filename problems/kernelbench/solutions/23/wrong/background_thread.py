# expect: timing_escape|unwritten|inaccurate|replay|impossible_speed|nonfinite
# expect-cuda: timing_escape|unwritten|inaccurate|replay|impossible_speed|oom|nonfinite
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax). Hack T2 (thread injection).

forward allocates the output, starts a daemon thread that launches the (correct) Triton softmax into it, and
returns at once. The timed region sees only an allocation; the output is complete a little later, when an
untimed checker reads it, or not yet, depending on the race. kbenv counts threads before and after each call
and syncs before reading outputs; a call that does no work also falls under the physical floor.

At full size on the H200 the first thread's Triton launch (JIT load) stalls the others; each stalled thread
holds its 6 GiB input and output, so the candidate's own allocations reach the worker's GPU memory cap (half the
GPU) a few trials in and its ``torch.empty_like`` raises: ``oom``, the candidate's fault (measured: 66 GiB held by
the worker's allocator when it failed, the supervisor's memory untouched).
"""
import threading

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


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        threading.Thread(target=_softmax, args=(x, y), daemon=True).start()
        return y

# expect: pass
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax): the known-good kernel, plus slow blocks of one call,
an attack on a rule kbenv does not pay by.

The timing phase estimates each side's fixed cost of a block (its intercept: the fence, the wake-ups) from a block
of one call against a longer one, and removes from the candidate's blocks the least of the trusted sides'
intercepts. The candidate's own intercept is measured the same way, from its own one-call block, and only reported
(``timings.own_intercept_estimates_ms``, ``speedup_own_intercept``). A block's frame says how many calls it holds,
and the executor's loop shares the candidate's process, so this candidate rebinds it to sleep 2 ms after any block
of one call: its own intercept comes out about 2 ms larger. Under a rule that removed the candidate's own
intercept, even clamped to the trusted sides' range, that would be paid as the whole spread of the trusted
intercepts, every block (at stop 51 on an H200, 0.05-0.53 ms a block: up to 13% of problem 88's 2.7 ms block).
Under kbenv's rule it buys nothing: it passes, held to its honest twin (the same kernel) within noise on a GPU, and
its ``speedup_own_intercept`` shows what the other rule would have paid.
"""
import sys
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl


_NEG_BIG = -3.4028234663852886e38  # -FLT_MAX: a finite "minus infinity" for the running max


@triton.jit
def _softmax_row_kernel(x_ptr, y_ptr, n_cols, stride_row, BLOCK: tl.constexpr, NEG_BIG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_row
    y_row = y_ptr + row * stride_row
    cols = tl.arange(0, BLOCK)

    m = tl.full([BLOCK], NEG_BIG, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.exp(m - row_max), axis=0)
    inv = 1.0 / row_sum

    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        y = tl.exp(x - row_max) * inv
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


for _m in list(sys.modules.values()):
    _ex = getattr(_m, "Executor", None)
    if isinstance(_ex, type) and hasattr(_ex, "run_block"):
        _run_block = _ex.run_block

        def _slow_single(self, msg, _run_block=_run_block):
            reply = _run_block(self, msg)
            if len(msg.get("calls") or []) == 1:
                time.sleep(0.002)
            return reply
        _ex.run_block = _slow_single


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # softmax over dim 1; any extra trailing dims are handled by moving dim 1 last.
        moved = x.dim() != 2
        if moved:
            x = x.movedim(1, -1)
        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        y2 = torch.empty_like(x2)
        n_rows = x2.shape[0]
        if n_rows > 0 and n_cols > 0:
            BLOCK = min(4096, triton.next_power_of_2(n_cols))
            _softmax_row_kernel[(n_rows,)](x2, y2, n_cols, x2.stride(0), BLOCK=BLOCK,
                                           NEG_BIG=_NEG_BIG, num_warps=8)
        y = y2.view(x.shape)
        if moved:
            y = y.movedim(-1, 1)
        return y

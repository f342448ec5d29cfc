# expect: pass
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax): the known-good kernel, with its executor's wait for
a frame turned into a spin and its one-call blocks run slow: the strongest shape of an attack on the candidate's
side of the block calibration (stop 54).

Since stop 54 the candidate's blocks lose the compared baseline's intercept, capped by the upper end of the
candidate's own estimate (``BlockCalibration.candidate_s``). Two levers act on that in the candidate's process: its
true fixed cost a block (the wake-up when a block's frame arrives: here a busy loop polling the pipe instead of
sleeping in ``read``), and its own estimate (2 ms added after any one-call block, which the executor can tell from
the frame, as ``23:inflate_own_intercept`` does). Together they aim at a block that costs less than the baseline's
fixed cost while the full baseline figure is removed from it. The most that earns over the honest twin is the
baseline's figure less this executor's true fixed cost, over the block's calls, never more than half a block
(``test_block_calibration.py``); the spin saves a wake-up of tens of microseconds against a fixed cost of about 1
ms on an H100 or H200, so on a GPU it passes within noise of its twin (``kbenv redteam`` holds it there), and on
the CPU (no calibration) as its twin does.
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


def _spin_then(read):
    """A frame read that polls the pipe instead of sleeping in the kernel until it is readable."""
    import select

    def spin(fd, *a, **k):
        while not select.select([fd], [], [], 0)[0]:
            pass
        return read(fd, *a, **k)
    return spin


for _m in list(sys.modules.values()):
    _ns = getattr(_m, "__dict__", {})
    _wire = _ns.get("wire")
    if isinstance(_ns.get("Executor"), type) and hasattr(_wire, "read_frame"):
        _wire.read_frame = _spin_then(_wire.read_frame)


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

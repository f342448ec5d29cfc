# expect: timing_tamper|replay
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax): less accurate arithmetic only when timed.

The correctness trials are always an evaluation's first blocks, so a candidate can tell them by their place:
here, by counting the blocks it has been sent (read from the executor's frame). In its first blocks it is the
honest softmax; from the fifth on it rounds every output to a 12-bit mantissa (error near 1e-4 of each value:
coarse arithmetic, such as TF32 inputs in a matmul, or a fast approximate exp). Before stop 29 a timed call was
re-checked on its max error only, against the loose 1e-3 bound, so this passed (red-team: TF32 and bf16 in timed
calls only, problem 1). A timed call is now held to the tolerance of its trials' relative Frobenius error
(``replay``) and to 4x the candidate's own error in its default-domain trials (``timing_tamper``).
"""
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl

_seen = []  # the blocks this process has been sent


def _block_number() -> int:
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "run_block" and "calls" in f.f_locals:
            calls = f.f_locals["calls"]
            if not _seen or _seen[-1] is not calls:
                _seen.append(calls)
            return len(_seen)
        f = f.f_back
    return 0


@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -3.4028234663852886e38, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):  # online max and sum, then one pass that writes
        x = tl.load(x_ptr + row * stride + start + cols, mask=start + cols < n_cols, other=float("-inf"))
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, axis=0)
    inv = 1.0 / tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + row * stride + start + cols, mask=mask, other=0.0)
        tl.store(y_ptr + row * stride + start + cols, tl.exp(x - row_max) * inv, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n_cols = x.shape[-1]
        _softmax_rows[(x.numel() // n_cols,)](x, y, n_cols, n_cols, BLOCK=1024)
        if _block_number() >= 5:  # past the trials: coarse outputs (12 mantissa bits kept)
            y = (y.view(torch.int32) + (1 << 10)).bitwise_and_(~((1 << 11) - 1)).view(torch.float32)
        return y

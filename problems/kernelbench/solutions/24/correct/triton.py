import torch, torch.nn as nn, triton, triton.language as tl

"""KernelBench level 1 #24 (LogSoftmax): y = x - logsumexp(x) along `dim` (dim 1 of a 2-D input).

Strategy: the reduced dim is made the last, contiguous one (a no-op for the problem's 2-D input
with dim=1); one program per row, two passes in BLOCK-wide tiles, so very long rows (393216
columns at full size) work:
  pass 1 (online logsumexp): per-lane running max m and running sum s of exp(x - m), rescaled when
          the max grows; lanes are combined into the row max M and S = sum s * exp(m - M);
          lse = M + log(S).
  pass 2: re-read and write x - lse in the input dtype.
fp32 arithmetic, 64-bit row offsets, 1-D grid over rows. Traffic: 2 reads + 1 write per element.
"""

_NEG_BIG = -3.4028234663852886e38  # -FLT_MAX


@triton.jit
def _log_softmax_row_kernel(x_ptr, y_ptr, n_cols, stride_row, BLOCK: tl.constexpr, NEG_BIG: tl.constexpr):
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
    lse = row_max + tl.log(row_sum)

    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + offs, (x - lse).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.dim % x.dim()
        moved = d != x.dim() - 1
        if moved:
            x = x.movedim(d, -1)
        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        y2 = torch.empty_like(x2)
        n_rows = x2.shape[0]
        if n_rows > 0 and n_cols > 0:
            BLOCK = min(4096, triton.next_power_of_2(n_cols))
            _log_softmax_row_kernel[(n_rows,)](x2, y2, n_cols, x2.stride(0), BLOCK=BLOCK,
                                               NEG_BIG=_NEG_BIG, num_warps=8)
        y = y2.view(x.shape)
        if moved:
            y = y.movedim(-1, d)
        return y

import torch, torch.nn as nn, triton, triton.language as tl

"""KernelBench level 1 #23 (Softmax): y = softmax(x, dim=1) for a 2-D x of shape (rows, cols).

Strategy: one program per row, two passes over the row in BLOCK-wide column tiles, so rows of any
length (393216 columns at full size) work without holding the row in registers.
  pass 1 (online softmax): every lane keeps its own running max m and running sum s of exp(x - m),
          rescaling s by exp(m_old - m_new) when the max grows; at the end the lanes are combined
          into the row max M and the row sum S = sum_lane s * exp(m_lane - M).
  pass 2: re-read the row, write exp(x - M) / S in the input dtype.
Arithmetic is fp32; 64-bit row offsets; the grid is 1-D over rows (axis 0).
Traffic: 2 reads + 1 write per element.
"""

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

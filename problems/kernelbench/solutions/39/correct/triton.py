import torch, torch.nn as nn, triton, triton.language as tl

"""KernelBench level 1 #39 (L2Norm): y = x / ||x||_2 with the norm over dim 1 of a 2-D x (rows, cols).

Strategy: one program per row (1-D grid over rows, 64-bit offsets). Pass 1 walks the row in
BLOCK-wide tiles accumulating x**2 per lane in fp32 and reduces to the row norm; pass 2 re-reads
the row (256 KiB at full size) and writes x / norm in the input dtype.
Inputs with more than 2 dims reduce over dim 1 by moving it last first.
"""


@triton.jit
def _l2norm_row_kernel(x_ptr, y_ptr, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_row
    y_row = y_ptr + row * stride_row
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    norm = tl.sqrt(tl.sum(acc, axis=0))
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + offs, (x / norm).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        moved = x.dim() != 2
        if moved:
            x = x.movedim(1, -1)
        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        y2 = torch.empty_like(x2)
        if x2.shape[0] > 0 and n_cols > 0:
            BLOCK = min(4096, triton.next_power_of_2(n_cols))
            _l2norm_row_kernel[(x2.shape[0],)](x2, y2, n_cols, x2.stride(0), BLOCK=BLOCK, num_warps=8)
        y = y2.view(x.shape)
        if moved:
            y = y.movedim(-1, 1)
        return y

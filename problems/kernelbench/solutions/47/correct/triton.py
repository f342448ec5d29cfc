import torch, torch.nn as nn, triton, triton.language as tl

"""KernelBench level 1 #47 (Sum reduction over a dimension): y = x.sum(dim, keepdim=True).

Strategy: view the contiguous input as (B, R, S): B = prod(dims before `dim`), R = the reduced
size, S = prod(dims after). Each program owns one b and BLOCK_S consecutive s (coalesced loads
along the contiguous S axis) and walks R in BLOCK_R-row tiles, accumulating a [BLOCK_R, BLOCK_S]
fp32 tile that is reduced over rows at the end; the result is stored in the input dtype. When
S == 1 (reducing the last dim) the tile degenerates to BLOCK_R contiguous elements. 1-D grid of
B * cdiv(S, BLOCK_S) programs; 64-bit offsets (the full-size input has 2.1e9 elements).
"""


@triton.jit
def _sum_dim_kernel(x_ptr, y_ptr, R, S, n_sblk, BLOCK_R: tl.constexpr, BLOCK_S: tl.constexpr):
    pid = tl.program_id(0)
    b = (pid // n_sblk).to(tl.int64)
    s_offs = (pid % n_sblk) * BLOCK_S + tl.arange(0, BLOCK_S)
    s_mask = s_offs < S
    r_ar = tl.arange(0, BLOCK_R)
    base = b * R * S
    acc = tl.zeros([BLOCK_R, BLOCK_S], tl.float32)
    for r0 in range(0, R, BLOCK_R):
        r = r0 + r_ar
        offs = base + r.to(tl.int64)[:, None] * S + s_offs[None, :]
        mask = (r < R)[:, None] & s_mask[None, :]
        acc += tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    total = tl.sum(acc, axis=0)
    tl.store(y_ptr + b * S + s_offs, total.to(y_ptr.dtype.element_ty), mask=s_mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.dim % x.dim()
        x = x.contiguous()
        shape = list(x.shape)
        R = shape[d]
        B = 1
        for v in shape[:d]:
            B *= v
        S = 1
        for v in shape[d + 1:]:
            S *= v
        out_shape = shape[:d] + [1] + shape[d + 1:]
        y = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        if B * S == 0:
            return y
        if R == 0:
            return y.zero_()
        BLOCK_S = min(128, triton.next_power_of_2(S))
        BLOCK_R = min(max(1, 4096 // BLOCK_S), triton.next_power_of_2(R))
        n_sblk = triton.cdiv(S, BLOCK_S)
        _sum_dim_kernel[(B * n_sblk,)](x, y, R, S, n_sblk, BLOCK_R=BLOCK_R, BLOCK_S=BLOCK_S, num_warps=8)
        return y

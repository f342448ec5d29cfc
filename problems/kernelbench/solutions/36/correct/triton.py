import torch, torch.nn as nn, triton, triton.language as tl

"""KernelBench level 1 #36 (RMSNorm over dim 1): y = x / sqrt(mean(x**2, dim=1) + eps) for x of shape
(batch, features, *spatial); no learnable parameters.

Strategy: view x as (B, C, S) with S = prod(spatial) contiguous. Each program owns one batch index
and BLOCK_S consecutive spatial positions (coalesced along S) and loops over the channels in
BLOCK_C-row tiles twice: pass 1 accumulates the per-position sum of squares in fp32, pass 2 re-reads
the tile (mostly from L2: a program's slab is C * BLOCK_S elements) and writes x * rsqrt-equivalent
(x / sqrt(ms + eps)) in the input dtype. 1-D grid of B * cdiv(S, BLOCK_S) programs, 64-bit offsets.
"""


@triton.jit
def _rmsnorm_dim1_kernel(x_ptr, y_ptr, C, S, n_sblk, eps,
                         BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    pid = tl.program_id(0)
    b = (pid // n_sblk).to(tl.int64)
    sblk = pid % n_sblk
    s_offs = sblk * BLOCK_S + tl.arange(0, BLOCK_S)
    s_mask = s_offs < S
    c_ar = tl.arange(0, BLOCK_C)
    base = b * C * S

    acc = tl.zeros([BLOCK_C, BLOCK_S], tl.float32)
    for c0 in range(0, C, BLOCK_C):
        c = c0 + c_ar
        offs = base + c.to(tl.int64)[:, None] * S + s_offs[None, :]
        mask = (c < C)[:, None] & s_mask[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    ms = tl.sum(acc, axis=0) / C
    rms = tl.sqrt(ms + eps)

    for c0 in range(0, C, BLOCK_C):
        c = c0 + c_ar
        offs = base + c.to(tl.int64)[:, None] * S + s_offs[None, :]
        mask = (c < C)[:, None] & s_mask[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = x / rms[None, :]
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        B, C = x.shape[0], x.shape[1]
        S = x.numel() // max(1, B * C)
        if x.numel() == 0:
            return y
        BLOCK_S = min(512, triton.next_power_of_2(S))
        BLOCK_C = min(triton.next_power_of_2(C), max(1, 4096 // BLOCK_S))
        n_sblk = triton.cdiv(S, BLOCK_S)
        _rmsnorm_dim1_kernel[(B * n_sblk,)](x, y, C, S, n_sblk, float(self.eps),
                                            BLOCK_C=BLOCK_C, BLOCK_S=BLOCK_S, num_warps=8)
        return y

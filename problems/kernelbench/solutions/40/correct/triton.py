import torch, torch.nn as nn, triton, triton.language as tl

"""KernelBench level 1 #40 (LayerNorm): nn.LayerNorm(normalized_shape) over the trailing dims
(features, dim1, dim2), eps from the module, affine weight/bias.

The parameters live in an nn.LayerNorm held by this module (same construction as the reference,
so seeded construction and state_dict match); only its tensors are read, the torch op is never run.

Strategy: each sample is a row of N = prod(normalized_shape) elements (4M at full size, only 16
rows), so one program per row would leave the GPU idle. The row is split into chunks:
  1. _ln_stats: grid (rows * chunks); each program computes its chunk's mean (first pass), then the
     sum of squared deviations from that mean (second pass, mostly from L2): a centered figure, so no
     large offset or outlier in the row cancels it (a one-pass E[x^2] - E[x]^2, even shifted by one
     element, loses the variance when that element is an outlier of the row).
  2. _ln_apply: same grid; each program merges its row's chunk statistics (Chan et al.: fixed order,
     so identical in every program) into mean and rstd = 1/sqrt(var + eps), and writes
     (x - mean) * rstd * w + b for its chunk in the input dtype.
fp32 statistics, 64-bit offsets. Traffic: 2-3 reads + 1 write per element plus weight/bias.
"""


@triton.jit
def _ln_stats(x_ptr, m_ptr, q_ptr, N, CHUNK, n_chunks, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = (pid // n_chunks).to(tl.int64)
    ch = pid % n_chunks
    x_row = x_ptr + row * N
    ar = tl.arange(0, BLOCK)
    start0 = ch.to(tl.int64) * CHUNK
    count = tl.minimum(CHUNK, N - start0).to(tl.float32)
    acc = tl.zeros([BLOCK], tl.float32)
    for off in range(0, CHUNK, BLOCK):
        offs = start0 + off + ar
        mask = (offs < N) & (off + ar < CHUNK)
        acc += tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / count
    acc2 = tl.zeros([BLOCK], tl.float32)
    for off in range(0, CHUNK, BLOCK):
        offs = start0 + off + ar
        mask = (offs < N) & (off + ar < CHUNK)
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc2 += d * d
    tl.store(m_ptr + pid, mean)
    tl.store(q_ptr + pid, tl.sum(acc2, axis=0))


@triton.jit
def _ln_apply(x_ptr, w_ptr, b_ptr, y_ptr, m_ptr, q_ptr, N, CHUNK, n_chunks, eps,
              BLOCK: tl.constexpr, P_BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = pid // n_chunks
    ch = pid % n_chunks
    p = tl.arange(0, P_BLOCK)
    pm = p < n_chunks
    cm = tl.load(m_ptr + row * n_chunks + p, mask=pm, other=0.0)
    cq = tl.load(q_ptr + row * n_chunks + p, mask=pm, other=0.0)
    cnt = tl.where(pm, tl.minimum(CHUNK, N - p.to(tl.int64) * CHUNK).to(tl.float32), 0.0)
    mean = tl.sum(cnt * cm, axis=0) / N
    dm = tl.where(pm, cm - mean, 0.0)
    var = (tl.sum(cq, axis=0) + tl.sum(cnt * dm * dm, axis=0)) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    row64 = row.to(tl.int64)
    x_row = x_ptr + row64 * N
    y_row = y_ptr + row64 * N
    ar = tl.arange(0, BLOCK)
    start0 = ch.to(tl.int64) * CHUNK
    for off in range(0, CHUNK, BLOCK):
        offs = start0 + off + ar
        mask = (offs < N) & (off + ar < CHUNK)
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        N = 1
        for d in self.ln.normalized_shape:
            N *= d
        rows = x.numel() // N if N > 0 else 0
        if rows == 0 or N == 0:
            return y
        dev = x.device
        w = self.ln.weight if self.ln.weight is not None else torch.ones(N, device=dev, dtype=x.dtype)
        b = self.ln.bias if self.ln.bias is not None else torch.zeros(N, device=dev, dtype=x.dtype)
        w = w.contiguous().view(-1)
        b = b.contiguous().view(-1)
        BLOCK = min(4096, triton.next_power_of_2(N))
        # chunk: a multiple of BLOCK, aiming at >= ~1000 programs in total but <= 16 tiles each
        target_chunks = max(1, triton.cdiv(1024, rows))
        CHUNK = triton.cdiv(triton.cdiv(N, target_chunks), BLOCK) * BLOCK
        CHUNK = max(BLOCK, min(CHUNK, 16 * BLOCK))
        n_chunks = triton.cdiv(N, CHUNK)
        grid = (rows * n_chunks,)
        cmean = torch.empty(rows * n_chunks, device=dev, dtype=torch.float32)
        cm2 = torch.empty(rows * n_chunks, device=dev, dtype=torch.float32)
        _ln_stats[grid](x, cmean, cm2, N, CHUNK, n_chunks, BLOCK=BLOCK, num_warps=8)
        _ln_apply[grid](x, w, b, y, cmean, cm2, N, CHUNK, n_chunks, float(self.ln.eps),
                        BLOCK=BLOCK, P_BLOCK=triton.next_power_of_2(n_chunks), num_warps=8)
        return y

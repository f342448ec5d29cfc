import torch, torch.nn as nn, triton, triton.language as tl

"""KernelBench level 1 #37 (FrobeniusNorm): y = x / ||x||_F, the norm taken over the whole tensor.

Strategy (two kernels, deterministic, no atomics):
  1. _sumsq_partials: a fixed-size grid of P <= 1024 programs; program p walks the flat tensor in
     BLOCK-element tiles p, p+P, p+2P, ... accumulating x**2 per lane in fp32, and writes one
     partial sum to partials[p].
  2. _scale: every program re-reduces the P partials (a tiny, L2-resident vector, always in the
     same order, so every program gets the bit-identical norm), takes sqrt, and writes x / norm
     for its BLOCK-element tile in the input dtype.
Traffic: 2 reads + 1 write per element. 64-bit offsets.
"""

_MAX_PARTIALS = 1024


@triton.jit
def _sumsq_partials(x_ptr, part_ptr, n, n_prog, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    ar = tl.arange(0, BLOCK)
    n_tiles = tl.cdiv(n, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    offs = pid.to(tl.int64) * BLOCK + ar
    step = n_prog * BLOCK  # <= 1024 * BLOCK, fits in int32; offs stays int64
    for _t in range(pid, n_tiles, n_prog):
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
        offs += step
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _scale(x_ptr, y_ptr, part_ptr, n, n_part, BLOCK: tl.constexpr, P_BLOCK: tl.constexpr):
    p_offs = tl.arange(0, P_BLOCK)
    parts = tl.load(part_ptr + p_offs, mask=p_offs < n_part, other=0.0)
    norm = tl.sqrt(tl.sum(parts, axis=0))
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (x / norm).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n == 0:
            return y
        BLOCK = 4096
        n_tiles = triton.cdiv(n, BLOCK)
        n_prog = min(n_tiles, _MAX_PARTIALS)
        partials = torch.empty(n_prog, device=x.device, dtype=torch.float32)
        _sumsq_partials[(n_prog,)](x, partials, n, n_prog, BLOCK=BLOCK, num_warps=8)
        _scale[(n_tiles,)](x, y, partials, n, n_prog, BLOCK=BLOCK,
                           P_BLOCK=triton.next_power_of_2(n_prog), num_warps=8)
        return y

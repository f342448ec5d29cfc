import torch, torch.nn as nn, triton, triton.language as tl

"""KernelBench level 1 #94 (MSELoss): loss = mean((predictions - targets)**2), a 0-dim tensor.

Strategy (two kernels, deterministic, no atomics):
  1. _sq_diff_partials: a fixed grid of P <= 1024 programs; program p walks the flat inputs in
     BLOCK-element tiles p, p+P, ... accumulating (a - b)**2 per lane in fp32 (64-bit offsets),
     and writes one partial sum.
  2. _finalize_mean: one program sums the P partials in a fixed order and writes sum / n in the
     input dtype into the 0-dim output.
Traffic: one read of each input.
"""

_MAX_PARTIALS = 1024


@triton.jit
def _sq_diff_partials(a_ptr, b_ptr, part_ptr, n, n_prog, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    n_tiles = tl.cdiv(n, BLOCK)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    step = n_prog * BLOCK  # <= 1024 * BLOCK, fits in int32; offs stays int64
    acc = tl.zeros([BLOCK], tl.float32)
    for _t in range(pid, n_tiles, n_prog):
        mask = offs < n
        a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        d = a - b
        acc += d * d
        offs += step
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _finalize_mean(part_ptr, out_ptr, n_part, n, P_BLOCK: tl.constexpr):
    p = tl.arange(0, P_BLOCK)
    parts = tl.load(part_ptr + p, mask=p < n_part, other=0.0)
    total = tl.sum(parts, axis=0)
    tl.store(out_ptr, (total / n).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if predictions.shape != targets.shape:
            predictions, targets = torch.broadcast_tensors(predictions, targets)
        a = predictions.contiguous()
        b = targets.contiguous()
        out_dtype = torch.promote_types(a.dtype, b.dtype)
        out = torch.empty((), device=a.device, dtype=out_dtype)
        n = a.numel()
        if n == 0:
            return out.fill_(float("nan"))
        BLOCK = 4096
        n_prog = min(triton.cdiv(n, BLOCK), _MAX_PARTIALS)
        partials = torch.empty(n_prog, device=a.device, dtype=torch.float32)
        _sq_diff_partials[(n_prog,)](a, b, partials, n, n_prog, BLOCK=BLOCK, num_warps=8)
        _finalize_mean[(1,)](partials, out, n_prog, float(n), P_BLOCK=triton.next_power_of_2(n_prog),
                             num_warps=4)
        return out

# expect: inaccurate
"""Known-wrong candidate for DLRM-Bench #1 (EmbeddingBagSum). An off-by-one that keeps the invariant: every bag
is summed correctly but stored one row down (bag b into row (b + 1) % n_bags, the last bag wrapping to row 0).

Every output row is a real bag sum, so scale, distribution and the written fraction all look right, and the
bag_total invariant (sum over all output rows == sum of all gathered rows) holds exactly. Only the elementwise
comparison with the reference catches it (inaccurate): a candidate can satisfy an invariant and still be wrong.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bag_sum_kernel(w_ptr, idx_ptr, off_ptr, out_ptr, n_idx, n_bags, D, out_row_shift,
                    BLOCK_D: tl.constexpr):
    # one program per bag: sum the table rows named by indices[start:end] in fp32
    bag = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    start = tl.load(off_ptr + bag)
    end = tl.where(bag + 1 < n_bags, tl.load(off_ptr + bag + 1, mask=bag + 1 < n_bags, other=0), n_idx)
    acc = tl.zeros([BLOCK_D], tl.float32)
    for i in range(start, end):
        row = tl.load(idx_ptr + i)
        acc += tl.load(w_ptr + row * D + cols, mask=cols < D, other=0.0).to(tl.float32)
    out_row = (bag + out_row_shift) % n_bags
    tl.store(out_ptr + out_row * D + cols, acc.to(out_ptr.dtype.element_ty), mask=cols < D)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, weight: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        weight, indices, offsets = weight.contiguous(), indices.contiguous(), offsets.contiguous()
        n_bags, D = offsets.shape[0], weight.shape[1]
        out = torch.empty((n_bags, D), dtype=weight.dtype, device=weight.device)
        _bag_sum_kernel[(n_bags,)](weight, indices, offsets, out, indices.numel(), n_bags, D, 1,
                                   BLOCK_D=triton.next_power_of_2(D))
        return out

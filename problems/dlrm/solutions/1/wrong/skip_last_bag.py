# expect: unwritten|inaccurate|invariant|nonfinite
"""Known-wrong candidate for DLRM-Bench #1 (EmbeddingBagSum). Fault / hack O10: the last bag is never computed.

The kernel sums each bag correctly, but the launch grid is n_bags - 1 programs: the author reasoned that a
bag's end comes from offsets[b + 1], forgetting that with include_last_offset=False the last bag runs to the
end of indices. The output comes from torch.empty, so the last row is whatever the allocator left there: a tiny
unwritten fraction (1 row of 16384 at full size, 1 of 16 at the small size), which an error averaged over the
whole tensor can miss; the written-fraction check and the bag_total invariant do not.
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
        _bag_sum_kernel[(n_bags - 1,)](weight, indices, offsets, out, indices.numel(), n_bags, D, 0,
                                       BLOCK_D=triton.next_power_of_2(D))
        return out

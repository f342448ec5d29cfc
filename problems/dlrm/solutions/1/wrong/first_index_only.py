# expect: invariant|inaccurate
"""Known-wrong candidate for DLRM-Bench #1 (EmbeddingBagSum). Hack O10 (partial work): each bag takes only its
first row.

One program per bag gathers weight[indices[offsets[b]]] and stores it as the bag's output: one row read per bag
instead of up to 63 (at full size), so it is many times faster. Every output row is a plausible embedding (same
scale and distribution as a real one), but it is not the bag's sum: the relative error is large and the
bag_total invariant (sum over bags == sum of all gathered rows) fails.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _first_row_kernel(w_ptr, idx_ptr, off_ptr, out_ptr, n_idx, D, BLOCK_D: tl.constexpr):
    bag = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    start = tl.load(off_ptr + bag)
    row = tl.load(idx_ptr + start, mask=start < n_idx, other=0)
    vals = tl.load(w_ptr + row * D + cols, mask=(cols < D) & (start < n_idx), other=0.0)
    tl.store(out_ptr + bag * D + cols, vals.to(tl.float32).to(out_ptr.dtype.element_ty), mask=cols < D)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, weight: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        weight, indices, offsets = weight.contiguous(), indices.contiguous(), offsets.contiguous()
        n_bags, D = offsets.shape[0], weight.shape[1]
        out = torch.empty((n_bags, D), dtype=weight.dtype, device=weight.device)
        _first_row_kernel[(n_bags,)](weight, indices, offsets, out, indices.numel(), D,
                                     BLOCK_D=triton.next_power_of_2(D))
        return out

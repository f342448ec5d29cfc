import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Weighted sum pooling (DLRM's `--weighted-pooling`, FBGEMM's `weighted` kernels, Caffe2's
    SparseLengthsWeightedSum): each bag's output row is the sum of `per_sample_weights[i] * weight[indices[i]]`
    over the bag's positions i.

    Bags are given PyTorch-style: `offsets[b]` is where bag b starts in `indices`, bag b ends where bag b+1 starts
    (the last bag runs to the end of `indices`), and there is no trailing offset (`include_last_offset=False`).
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(
        self,
        weight: torch.Tensor,
        indices: torch.Tensor,
        offsets: torch.Tensor,
        per_sample_weights: torch.Tensor,
    ) -> torch.Tensor:
        """
        Args:
            weight (torch.Tensor): embedding table, shape (num_embeddings, embedding_dim).
            indices (torch.Tensor): int64 row ids into `weight`, shape (num_indices,).
            offsets (torch.Tensor): int64 start of each bag in `indices`, shape (batch_size,); offsets[0] == 0.
            per_sample_weights (torch.Tensor): one weight per index, shape (num_indices,), same dtype as `weight`.

        Returns:
            torch.Tensor: pooled embeddings, shape (batch_size, embedding_dim), dtype of `weight`.
        """
        return F.embedding_bag(indices, weight, offsets, mode="sum", per_sample_weights=per_sample_weights)


num_embeddings = 1_000_000
embedding_dim = 128
batch_size = 16384
min_bag_size = 1
max_bag_size = 63


def _bag_offsets(num_bags, shortest, longest):
    # Half of the lengths are drawn uniformly from [shortest, longest]; the other half mirror them
    # (L -> shortest + longest - L, uniform on the same range). After a shuffle every bag's length is uniform
    # on [shortest, longest], and the total is exactly num_bags * (shortest + longest) / 2, so every shape is
    # known without looking at the drawn values (inputs can be built on the meta device).
    assert num_bags % 2 == 0, "batch_size must be even"
    half = torch.randint(shortest, longest + 1, (num_bags // 2,))
    lengths = torch.cat([half, (shortest + longest) - half])[torch.randperm(num_bags)]
    return torch.cumsum(lengths, 0) - lengths


def get_inputs():
    num_indices = batch_size * (min_bag_size + max_bag_size) // 2
    weight = torch.randn(num_embeddings, embedding_dim)
    indices = torch.randint(0, num_embeddings, (num_indices,))
    offsets = _bag_offsets(batch_size, min_bag_size, max_bag_size)
    per_sample_weights = torch.rand(num_indices)
    return [weight, indices, offsets, per_sample_weights]


def get_init_inputs():
    return []

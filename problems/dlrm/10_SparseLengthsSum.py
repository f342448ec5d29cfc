import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Caffe2's SparseLengthsSum: sum pooling where bags are given by their LENGTHS rather than offsets, with int32
    indices and lengths. Bag b covers positions [sum(lengths[:b]), sum(lengths[:b + 1])) of `indices`, and its
    output row is the sum of the table rows named there. The reference turns lengths into start offsets with an
    exclusive prefix sum and calls a sum-mode embedding bag; a kernel may fuse the scan into the lookup.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, data: torch.Tensor, indices: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """
        Args:
            data (torch.Tensor): embedding table, shape (num_embeddings, embedding_dim).
            indices (torch.Tensor): int32 row ids into `data`, shape (num_indices,).
            lengths (torch.Tensor): int32 bag lengths, shape (batch_size,), summing to num_indices.

        Returns:
            torch.Tensor: pooled embeddings, shape (batch_size, embedding_dim), dtype of `data`.
        """
        offsets = torch.cumsum(lengths, 0, dtype=torch.int32) - lengths
        return F.embedding_bag(indices, data, offsets, mode="sum")


num_embeddings = 1_000_000
embedding_dim = 128
batch_size = 16384
min_bag_size = 1
max_bag_size = 63


def _bag_lengths(num_bags, shortest, longest):
    # Half of the lengths are drawn uniformly from [shortest, longest]; the other half mirror them
    # (L -> shortest + longest - L, uniform on the same range). After a shuffle every bag's length is uniform
    # on [shortest, longest], and the total is exactly num_bags * (shortest + longest) / 2, so every shape is
    # known without looking at the drawn values (inputs can be built on the meta device).
    assert num_bags % 2 == 0, "batch_size must be even"
    half = torch.randint(shortest, longest + 1, (num_bags // 2,), dtype=torch.int32)
    return torch.cat([half, (shortest + longest) - half])[torch.randperm(num_bags)]


def get_inputs():
    num_indices = batch_size * (min_bag_size + max_bag_size) // 2
    data = torch.randn(num_embeddings, embedding_dim)
    indices = torch.randint(0, num_embeddings, (num_indices,), dtype=torch.int32)
    lengths = _bag_lengths(batch_size, min_bag_size, max_bag_size)
    return [data, indices, lengths]


def get_init_inputs():
    return []

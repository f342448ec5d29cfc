import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Mean-pooled embedding-bag lookup (`nn.EmbeddingBag`'s default mode, TorchRec's `PoolingType.MEAN`): each bag's
    output row is the average of the table rows its indices name. An empty bag gives a row of zeros, as in
    PyTorch; a few bags here are empty on purpose.

    Bags are given PyTorch-style: `offsets[b]` is where bag b starts in `indices`, bag b ends where bag b+1 starts
    (the last bag runs to the end of `indices`), and there is no trailing offset (`include_last_offset=False`).
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, weight: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """
        Args:
            weight (torch.Tensor): embedding table, shape (num_embeddings, embedding_dim).
            indices (torch.Tensor): int64 row ids into `weight`, shape (num_indices,).
            offsets (torch.Tensor): int64 start of each bag in `indices`, shape (batch_size,); non-decreasing,
                offsets[0] == 0; equal neighbours mean an empty bag.

        Returns:
            torch.Tensor: mean-pooled embeddings, shape (batch_size, embedding_dim), dtype of `weight`; zero rows
            for empty bags.
        """
        return F.embedding_bag(indices, weight, offsets, mode="mean")


num_embeddings = 1_000_000
embedding_dim = 128
batch_size = 16384
min_bag_size = 1
max_bag_size = 63
num_empty_bags = 32


def _bag_offsets(num_bags, shortest, longest, num_empty):
    # Half of the lengths are drawn uniformly from [shortest, longest]; the other half mirror them
    # (L -> shortest + longest - L, uniform on the same range), so the total is exactly
    # num_bags * (shortest + longest) / 2 and every shape is known without looking at the drawn values (inputs
    # can be built on the meta device). `num_empty` of the drawn lengths are set to 0, which makes their mirrors
    # shortest + longest long: the empty bags' share goes to a few slightly longer bags and the total is kept.
    assert num_bags % 2 == 0, "batch_size must be even"
    assert num_empty <= num_bags // 2, "num_empty_bags must be at most batch_size / 2"
    half = torch.randint(shortest, longest + 1, (num_bags // 2,))
    half[:num_empty] = 0
    lengths = torch.cat([half, (shortest + longest) - half])[torch.randperm(num_bags)]
    return torch.cumsum(lengths, 0) - lengths


def get_inputs():
    num_indices = batch_size * (min_bag_size + max_bag_size) // 2
    weight = torch.randn(num_embeddings, embedding_dim)
    indices = torch.randint(0, num_embeddings, (num_indices,))
    offsets = _bag_offsets(batch_size, min_bag_size, max_bag_size, num_empty_bags)
    return [weight, indices, offsets]


def get_init_inputs():
    return []

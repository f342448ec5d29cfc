import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Unpooled embedding lookup (`nn.Embedding` forward, TorchRec's `PoolingType.NONE`, FBGEMM's `_nobag` kernels):
    output row i is the table row `indices[i]`.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, weight: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        """
        Args:
            weight (torch.Tensor): embedding table, shape (num_embeddings, embedding_dim).
            indices (torch.Tensor): int64 row ids into `weight`, shape (num_indices,).

        Returns:
            torch.Tensor: gathered rows, shape (num_indices, embedding_dim), dtype of `weight`.
        """
        return F.embedding(indices, weight)


num_embeddings = 1_000_000
embedding_dim = 128
num_indices = 524_288


def get_inputs():
    weight = torch.randn(num_embeddings, embedding_dim)
    indices = torch.randint(0, num_embeddings, (num_indices,))
    return [weight, indices]


def get_init_inputs():
    return []

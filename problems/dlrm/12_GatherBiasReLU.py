import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Gather with a fused epilogue: `relu(weight[indices] + bias)`, a learnable bias of width embedding_dim
    broadcast over the gathered rows. The bias is a parameter initialised N(0, 1).

    The table is an input, not a parameter, so the epilogue cannot be computed once over the table ahead of
    time: only the rows named by `indices` are transformed on each call.
    """

    def __init__(self, embedding_dim: int):
        """
        Args:
            embedding_dim (int): width of the rows and of the bias.
        """
        super(Model, self).__init__()
        self.bias = nn.Parameter(torch.randn(embedding_dim))

    def forward(self, weight: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        """
        Args:
            weight (torch.Tensor): table to gather from, shape (num_embeddings, embedding_dim).
            indices (torch.Tensor): int64 row ids into `weight`, shape (num_indices,).

        Returns:
            torch.Tensor: shape (num_indices, embedding_dim), dtype of `weight`, every element >= 0.
        """
        return torch.relu(F.embedding(indices, weight) + self.bias)


num_embeddings = 1_000_000
embedding_dim = 128
num_indices = 524_288


def get_inputs():
    weight = torch.randn(num_embeddings, embedding_dim)
    indices = torch.randint(0, num_embeddings, (num_indices,))
    return [weight, indices]


def get_init_inputs():
    return [embedding_dim]

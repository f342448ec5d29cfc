import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Gather followed by LayerNorm over each gathered row: `layer_norm(weight[indices])` with a learnable affine
    (`nn.LayerNorm(embedding_dim)`, eps 1e-5; gamma = 1 and beta = 0 at construction). A fusion target: the
    gathered rows need not be written out before they are normalised.

    The table is an input, not a parameter, so the normalisation cannot be computed once over the table ahead
    of time: only the rows named by `indices` are normalised on each call.
    """

    def __init__(self, embedding_dim: int):
        """
        Args:
            embedding_dim (int): width of the rows, the normalised dimension.
        """
        super(Model, self).__init__()
        self.norm = nn.LayerNorm(embedding_dim, eps=1e-5)

    def forward(self, weight: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        """
        Args:
            weight (torch.Tensor): table to gather from, shape (num_embeddings, embedding_dim).
            indices (torch.Tensor): int64 row ids into `weight`, shape (num_indices,).

        Returns:
            torch.Tensor: normalised rows, shape (num_indices, embedding_dim), dtype of `weight`.
        """
        return self.norm(F.embedding(indices, weight))


num_embeddings = 1_000_000
embedding_dim = 128
num_indices = 524_288


def get_inputs():
    weight = torch.randn(num_embeddings, embedding_dim)
    indices = torch.randint(0, num_embeddings, (num_indices,))
    return [weight, indices]


def get_init_inputs():
    return [embedding_dim]

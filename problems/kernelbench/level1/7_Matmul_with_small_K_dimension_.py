import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Matrix multiplication C = A @ B with a small reduction dimension: A is M x K and B is K x N, with K much
    smaller than M and N, so the output is far larger than the inputs.
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A: tensor of shape (M, K).
            B: tensor of shape (K, N).

        Returns:
            Tensor of shape (M, N), the product A @ B.
        """
        return torch.matmul(A, B)


M = 32768
N = 32768
K = 64


def get_inputs():
    A = torch.rand(M, K)
    B = torch.rand(K, N)
    return [A, B]


def get_init_inputs():
    return []  # no initialization arguments

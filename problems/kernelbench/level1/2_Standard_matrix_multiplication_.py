import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Standard matrix multiplication C = A @ B of an M x K matrix A by a K x N matrix B.
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


M = 2048
K = 8192
N = 4096


def get_inputs():
    A = torch.rand(M, K)
    B = torch.rand(K, N)
    return [A, B]


def get_init_inputs():
    return []  # no initialization arguments

import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Matrix-vector multiplication C = A @ B, where A is an M x K matrix and B is a K x 1 column vector,
    giving an M x 1 column vector.
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A: tensor of shape (M, K).
            B: tensor of shape (K, 1).

        Returns:
            Tensor of shape (M, 1), the product A @ B.
        """
        return torch.matmul(A, B)


M = 2048
K = 1048576


def get_inputs():
    A = torch.rand(M, K)
    B = torch.rand(K, 1)
    return [A, B]


def get_init_inputs():
    return []  # no initialization arguments

import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Matrix multiplication with a transposed left operand, C = A.T @ B, where A is stored as K x M and B as K
    x N.
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A: tensor of shape (K, M).
            B: tensor of shape (K, N).

        Returns:
            Tensor of shape (M, N), the product A.T @ B.
        """
        return torch.matmul(A.T, B)


M = 2048
K = 8192
N = 4096


def get_inputs():
    A = torch.rand(K, M)
    B = torch.rand(K, N)
    return [A, B]


def get_init_inputs():
    return []  # no initialization arguments

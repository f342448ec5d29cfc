import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Matrix multiplication with both operands transposed, C = A.T @ B.T, where A is stored as K x M and B as
    N x K.
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A: tensor of shape (K, M).
            B: tensor of shape (N, K).

        Returns:
            Tensor of shape (M, N), the product A.T @ B.T.
        """
        return torch.matmul(A.T, B.T)


M = 2048
K = 8192
N = 4096


def get_inputs():
    A = torch.rand(K, M)
    B = torch.rand(N, K)
    return [A, B]


def get_init_inputs():
    return []  # no initialization arguments

import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Multiplication of a 3D tensor by a matrix: every one of the N slices A[n] (an M x K matrix) is
    multiplied by the same K x L matrix B, computed with torch.matmul's broadcasting.
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A: tensor of shape (N, M, K).
            B: tensor of shape (K, L).

        Returns:
            Tensor of shape (N, M, L), the product A @ B.
        """
        return torch.matmul(A, B)


N = 16
M = 1024
K = 2048
L = 768


def get_inputs():
    A = torch.rand(N, M, K)
    B = torch.rand(K, L)
    return [A, B]


def get_init_inputs():
    return []  # no initialization arguments

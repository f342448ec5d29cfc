import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Multiplication of a diagonal matrix by a dense matrix, C = diag(A) @ B, where A holds the N diagonal entries
    and B is N x M. Row r of the result is row r of B scaled by A[r], which the reference computes as a broadcast
    multiply instead of forming the N x N diagonal matrix.
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A: tensor of shape (N,), the diagonal entries.
            B: tensor of shape (N, M).

        Returns:
            Tensor of shape (N, M), equal to diag(A) @ B.
        """
        return A.unsqueeze(1) * B


M = 4096
N = 4096


def get_inputs():
    A = torch.rand(N)
    B = torch.rand(N, M)
    return [A, B]


def get_init_inputs():
    return []  # no initialization arguments

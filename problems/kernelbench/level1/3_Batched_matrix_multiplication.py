import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Batched matrix multiplication with torch.bmm: for every batch index b, C[b] = A[b] @ B[b], where A[b] is
    m x k and B[b] is k x n.
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A: tensor of shape (batch_size, m, k).
            B: tensor of shape (batch_size, k, n).

        Returns:
            Tensor of shape (batch_size, m, n), the batched product.
        """
        return torch.bmm(A, B)


batch_size = 128
m = 512
k = 1024
n = 2048


def get_inputs():
    A = torch.rand(batch_size, m, k)
    B = torch.rand(batch_size, k, n)
    return [A, B]


def get_init_inputs():
    return []  # no initialization arguments

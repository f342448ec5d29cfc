import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Multiplication of a 4D tensor by a matrix along the last dimension, written as the Einstein sum C[b, i,
    j, k] = sum over l of A[b, i, j, l] * B[l, k].
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A: tensor of shape (b, i, j, l).
            B: tensor of shape (l, k).

        Returns:
            Tensor of shape (b, i, j, k).
        """
        return torch.einsum("bijl,lk->bijk", A, B)


b = 8
i = 256
j = 512
l = 256
k = 768


def get_inputs():
    A = torch.rand(b, i, j, l)
    B = torch.rand(l, k)
    return [A, B]


def get_init_inputs():
    return []  # no initialization arguments

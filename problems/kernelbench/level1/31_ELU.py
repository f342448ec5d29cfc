import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Elementwise ELU activation with a configurable alpha: y = x for x > 0 and y = alpha * (exp(x) - 1)
    otherwise.
    """

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: tensor of shape (batch_size, dim).

        Returns:
            Tensor of the same shape, elu(x).
        """
        return F.elu(x, alpha=self.alpha)


batch_size = 4096
dim = 393216
alpha = 1.0


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return [alpha]

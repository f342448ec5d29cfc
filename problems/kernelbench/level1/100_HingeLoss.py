import torch
import torch.nn as nn


class Model(nn.Module):
    """Hinge loss mean(clamp(1 - predictions * targets, min=0)) over every element, a scalar. Each row of predictions is one sample and targets holds one label in {-1, +1} per row, broadcast across the row (targets.unsqueeze(1)), so the op is defined for any batch_size and dim."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """
        Args:
            predictions: tensor of shape (batch_size, dim).
            targets: labels in {-1, +1} of shape (batch_size,).

        Returns:
            0-dim tensor holding the loss.
        """
        return torch.mean(torch.clamp(1 - predictions * targets.unsqueeze(1), min=0))


batch_size = 32768
dim = 32768


def get_inputs():
    predictions = torch.rand(batch_size, dim)
    targets = torch.randint(0, 2, (batch_size,)).float() * 2 - 1
    return [predictions, targets]


def get_init_inputs():
    return []

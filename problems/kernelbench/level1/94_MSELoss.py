import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean squared error between predictions and targets, averaged over every element: mean((predictions - targets)^2), a scalar. The predictions are scaled by a random scalar drawn with the inputs, so the result is not a near-constant of the input distribution."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """
        Args:
            predictions: tensor of shape (batch_size, dim).
            targets: tensor of the same shape.

        Returns:
            0-dim tensor holding the loss.
        """
        return torch.mean((predictions - targets) ** 2)


batch_size = 32768
dim = 32768


def get_inputs():
    scale = torch.rand(())
    predictions = torch.rand(batch_size, dim) * scale
    targets = torch.rand(batch_size, dim)
    return [predictions, targets]


def get_init_inputs():
    return []

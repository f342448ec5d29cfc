import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Smooth L1 (Huber, threshold 1) loss between predictions and targets, averaged over every element (F.smooth_l1_loss), a scalar: 0.5 d^2 where |d| < 1 and |d| - 0.5 elsewhere, with d = predictions - targets. The predictions are scaled by a random scalar drawn with the inputs."""

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
        return F.smooth_l1_loss(predictions, targets)


batch_size = 32768
dim = 32768


def get_inputs():
    scale = torch.rand(())
    predictions = torch.rand(batch_size, dim) * scale
    targets = torch.rand(batch_size, dim)
    return [predictions, targets]


def get_init_inputs():
    return []

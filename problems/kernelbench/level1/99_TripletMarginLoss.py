import torch
import torch.nn as nn


class Model(nn.Module):
    """Triplet margin loss (nn.TripletMarginLoss, Euclidean distance): mean over the batch of max(d(anchor, positive) - d(anchor, negative) + margin, 0), a scalar. The anchors are scaled by a random scalar drawn with the inputs."""

    def __init__(self, margin: float = 1.0):
        """
        Args:
            margin: the margin by which the negative must be farther than the positive.
        """
        super().__init__()
        self.loss_fn = nn.TripletMarginLoss(margin=margin)

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        """
        Args:
            anchor: tensor of shape (batch_size, dim).
            positive: tensor of the same shape.
            negative: tensor of the same shape.

        Returns:
            0-dim tensor holding the loss.
        """
        return self.loss_fn(anchor, positive, negative)


batch_size = 32768
dim = 8192
margin = 1.0


def get_inputs():
    scale = torch.rand(())
    anchor = torch.rand(batch_size, dim) * scale
    positive = torch.rand(batch_size, dim)
    negative = torch.rand(batch_size, dim)
    return [anchor, positive, negative]


def get_init_inputs():
    return [margin]

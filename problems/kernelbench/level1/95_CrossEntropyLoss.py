import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Multi-class cross-entropy (F.cross_entropy) of unnormalised logits against integer class targets, averaged over the batch, a scalar: mean over rows of logsumexp(logits) - logits[target]."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """
        Args:
            predictions: logits of shape (batch_size, num_classes).
            targets: int64 class indices of shape (batch_size,), each in [0, num_classes).

        Returns:
            0-dim tensor holding the loss.
        """
        return F.cross_entropy(predictions, targets)


batch_size = 32768
num_classes = 4096


def get_inputs():
    predictions = torch.rand(batch_size, num_classes)
    targets = torch.randint(0, num_classes, (batch_size,))
    return [predictions, targets]


def get_init_inputs():
    return []

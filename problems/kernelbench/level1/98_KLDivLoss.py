import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Kullback-Leibler divergence KL(targets || predictions) between row-wise probability distributions, summed over each row and averaged over the batch (F.kl_div on log(predictions) with reduction='batchmean'), a scalar. Both inputs are softmaxed over the last dimension when drawn; the predictions' logits are scaled by a random scalar first."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """
        Args:
            predictions: probabilities of shape (batch_size, dim), each row summing to 1.
            targets: probabilities of the same shape, each row summing to 1.

        Returns:
            0-dim tensor holding the loss.
        """
        return F.kl_div(torch.log(predictions), targets, reduction="batchmean")


batch_size = 16384
dim = 16384


def get_inputs():
    scale = torch.rand(())
    predictions = (torch.rand(batch_size, dim) * scale).softmax(dim=-1)
    targets = torch.rand(batch_size, dim).softmax(dim=-1)
    return [predictions, targets]


def get_init_inputs():
    return []

import torch
import torch.nn as nn


class Model(nn.Module):
    """
    2D batch normalization with nn.BatchNorm2d over num_features channels. The module is used in training
    mode, so each channel is normalized with the mean and biased variance of the current batch (over the
    batch and both spatial dimensions), eps 1e-5, then scaled and shifted by the affine parameters
    (initially ones and zeros); the running statistics are updated as a side effect.
    """

    def __init__(self, num_features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: tensor of shape (batch_size, features, dim1, dim2).

        Returns:
            Tensor of the same shape, batch-normalized.
        """
        return self.bn(x)


batch_size = 64
features = 64
dim1 = 512
dim2 = 512


def get_inputs():
    x = torch.rand(batch_size, features, dim1, dim2)
    return [x]


def get_init_inputs():
    return [features]

import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Group normalization with nn.GroupNorm: the channels are split into num_groups groups and each
    (sample, group) is normalized by the mean and biased variance over its channels and both spatial
    dimensions, eps 1e-5, then scaled and shifted per channel by the affine parameters (initially ones
    and zeros).
    """

    def __init__(self, num_features: int, num_groups: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: tensor of shape (batch_size, features, dim1, dim2).

        Returns:
            Tensor of the same shape, group-normalized.
        """
        return self.gn(x)


batch_size = 112
features = 64
num_groups = 8
dim1 = 512
dim2 = 512


def get_inputs():
    x = torch.rand(batch_size, features, dim1, dim2)
    return [x]


def get_init_inputs():
    return [features, num_groups]

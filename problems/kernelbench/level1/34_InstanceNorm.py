import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Instance normalization with nn.InstanceNorm2d (no affine parameters, no running statistics): every
    (sample, channel) plane is normalized by its own mean and biased variance over the two spatial
    dimensions, with eps 1e-5.
    """

    def __init__(self, num_features: int):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(num_features=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: tensor of shape (batch_size, features, dim1, dim2).

        Returns:
            Tensor of the same shape, instance-normalized.
        """
        return self.inorm(x)


batch_size = 112
features = 64
dim1 = 512
dim2 = 512


def get_inputs():
    x = torch.rand(batch_size, features, dim1, dim2)
    return [x]


def get_init_inputs():
    return [features]

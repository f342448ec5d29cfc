import torch
import torch.nn as nn


class Model(nn.Module):
    """
    3D average pooling with nn.AvgPool3d over the three spatial dimensions of an NCDHW tensor, with a cubic
    window of the given kernel size, stride and zero padding. With PyTorch's default count_include_pad=True the
    padded zeros count in the average, so every window is divided by kernel_size ** 3.
    """

    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0):
        super().__init__()
        self.avgpool = nn.AvgPool3d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: tensor of shape (batch_size, channels, depth, height, width).

        Returns:
            Tensor of shape (batch_size, channels, pooled_depth, pooled_height, pooled_width).
        """
        return self.avgpool(x)


batch_size = 16
channels = 32
depth = 128
height = 128
width = 256
kernel_size = 3
stride = 2
padding = 1


def get_inputs():
    x = torch.rand(batch_size, channels, depth, height, width)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding]

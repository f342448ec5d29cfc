import torch
import torch.nn as nn


class Model(nn.Module):
    """
    2D average pooling with nn.AvgPool2d over the two spatial dimensions of an NCHW tensor, with a square window
    of the given kernel size; the stride defaults to the kernel size (non-overlapping windows, trailing rows and
    columns that do not fill a window are dropped) and there is no padding by default.
    """

    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0):
        super().__init__()
        self.avgpool = nn.AvgPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: tensor of shape (batch_size, channels, height, width).

        Returns:
            Tensor of shape (batch_size, channels, pooled_height, pooled_width).
        """
        return self.avgpool(x)


batch_size = 16
channels = 64
height = 2048
width = 2048
kernel_size = 11


def get_inputs():
    x = torch.rand(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [kernel_size]

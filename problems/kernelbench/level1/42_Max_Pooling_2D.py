import torch
import torch.nn as nn


class Model(nn.Module):
    """
    2D max pooling with nn.MaxPool2d over the two spatial dimensions of an NCHW tensor, with a square window of
    the given kernel size, stride, implicit padding (padded positions never win the max) and dilation.
    """

    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.maxpool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: tensor of shape (batch_size, channels, height, width).

        Returns:
            Tensor of shape (batch_size, channels, pooled_height, pooled_width).
        """
        return self.maxpool(x)


batch_size = 32
channels = 64
height = 512
width = 512
kernel_size = 4
stride = 1
padding = 1
dilation = 1


def get_inputs():
    x = torch.rand(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]

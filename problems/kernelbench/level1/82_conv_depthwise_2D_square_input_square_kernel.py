import torch
import torch.nn as nn


class Model(nn.Module):
    """Depthwise 2D convolution: nn.Conv2d with groups equal to the channel count, so each channel is convolved with its own square kernel and the channel count is kept; no bias by default."""

    def __init__(
        self,
        in_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        bias: bool = False,
    ):
        """
        Args:
            in_channels: channels of the input and of the output.
            kernel_size: edge length of the square kernel.
            stride: stride of the convolution.
            padding: zero padding added on every side.
            bias: whether to add a learnable bias.
        """
        super().__init__()
        self.conv2d = nn.Conv2d(
            in_channels, in_channels, kernel_size,
            stride=stride, padding=padding, groups=in_channels, bias=bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input of shape (batch_size, in_channels, height, width).

        Returns:
            Output of shape (batch_size, in_channels, height_out, width_out).
        """
        return self.conv2d(x)


batch_size = 16
in_channels = 64
kernel_size = 3
height = 512
width = 512
stride = 1
padding = 0


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, kernel_size, stride, padding]

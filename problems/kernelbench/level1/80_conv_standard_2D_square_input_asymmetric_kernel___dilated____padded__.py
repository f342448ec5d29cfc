import torch
import torch.nn as nn


class Model(nn.Module):
    """Standard 2D convolution (nn.Conv2d) with a rectangular kernel, per-dimension padding and dilation, on a square input; no bias by default."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: tuple,
        stride: int = 1,
        padding: tuple = (0, 0),
        dilation: tuple = (1, 1),
        bias: bool = False,
    ):
        """
        Args:
            in_channels: channels of the input.
            out_channels: channels produced by the convolution.
            kernel_size: (kernel_height, kernel_width).
            stride: stride of the convolution.
            padding: (padding_height, padding_width), zero padding on each side.
            dilation: (dilation_height, dilation_width).
            bias: whether to add a learnable bias.
        """
        super().__init__()
        self.conv2d = nn.Conv2d(
            in_channels, out_channels, kernel_size,
            stride=stride, padding=padding, dilation=dilation, bias=bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input of shape (batch_size, in_channels, height, width).

        Returns:
            Output of shape (batch_size, out_channels, height_out, width_out).
        """
        return self.conv2d(x)


batch_size = 8
in_channels = 32
out_channels = 64
kernel_size = (5, 9)
height = 512
width = 512
stride = 1
padding = (2, 4)
dilation = (2, 3)


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation]

import torch
import torch.nn as nn


class Model(nn.Module):
    """Transposed 2D convolution (nn.ConvTranspose2d) with a rectangular kernel and per-dimension stride, padding and dilation, with grouped channels, on a non-square input; no bias by default."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: tuple,
        stride: tuple = (1, 1),
        padding: tuple = (0, 0),
        dilation: tuple = (1, 1),
        groups: int = 1,
        bias: bool = False,
    ):
        """
        Args:
            in_channels: channels of the input (divisible by groups).
            out_channels: channels produced by the transposed convolution (divisible by groups).
            kernel_size: (kernel_height, kernel_width).
            stride: (stride_height, stride_width).
            padding: (padding_height, padding_width), elements trimmed from each side of the output.
            dilation: (dilation_height, dilation_width).
            groups: number of blocked connections from input to output channels.
            bias: whether to add a learnable bias.
        """
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size,
            stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input of shape (batch_size, in_channels, height, width).

        Returns:
            Output of shape (batch_size, out_channels, height_out, width_out).
        """
        return self.conv_transpose2d(x)


batch_size = 16
in_channels = 32
out_channels = 64
kernel_size = (3, 5)
height = 128
width = 256
stride = (2, 3)
padding = (1, 2)
dilation = (2, 1)
groups = 4


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation, groups]

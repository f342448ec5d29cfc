import torch
import torch.nn as nn


class Model(nn.Module):
    """Transposed 3D convolution (nn.ConvTranspose3d) with a cubic kernel, stride, padding and grouped channels, on a non-cubic input; no bias by default."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        groups: int = 1,
        bias: bool = False,
    ):
        """
        Args:
            in_channels: channels of the input (divisible by groups).
            out_channels: channels produced by the transposed convolution (divisible by groups).
            kernel_size: edge length of the cubic kernel.
            stride: stride of the transposed convolution.
            padding: elements trimmed from each side of each spatial output dimension.
            groups: number of blocked connections from input to output channels.
            bias: whether to add a learnable bias.
        """
        super().__init__()
        self.conv_transpose3d = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size,
            stride=stride, padding=padding, groups=groups, bias=bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input of shape (batch_size, in_channels, depth, height, width).

        Returns:
            Output of shape (batch_size, out_channels, depth_out, height_out, width_out).
        """
        return self.conv_transpose3d(x)


batch_size = 4
in_channels = 32
out_channels = 32
kernel_size = 3
depth = 32
height = 64
width = 128
stride = 2
padding = 1
groups = 4


def get_inputs():
    x = torch.rand(batch_size, in_channels, depth, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, groups]

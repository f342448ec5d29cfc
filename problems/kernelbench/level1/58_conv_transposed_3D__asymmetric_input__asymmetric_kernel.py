import torch
import torch.nn as nn


class Model(nn.Module):
    """Transposed 3D convolution (nn.ConvTranspose3d) with a kernel of three different extents on a non-cubic input, no bias by default."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: tuple,
        stride: tuple = (1, 1, 1),
        padding: tuple = (0, 0, 0),
        output_padding: tuple = (0, 0, 0),
        groups: int = 1,
        bias: bool = False,
    ):
        """
        Args:
            in_channels: channels of the input.
            out_channels: channels produced by the transposed convolution.
            kernel_size: (kernel_depth, kernel_height, kernel_width).
            stride: stride of the transposed convolution.
            padding: number of elements trimmed from each side of every spatial output dimension.
            output_padding: extra size added to one side of the output.
            groups: number of blocked connections from input to output channels.
            bias: whether to add a learnable bias.
        """
        super().__init__()
        self.conv_transpose3d = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size,
            stride=stride, padding=padding, output_padding=output_padding, groups=groups, bias=bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input of shape (batch_size, in_channels, depth, height, width).

        Returns:
            Output of shape (batch_size, out_channels, depth_out, height_out, width_out).
        """
        return self.conv_transpose3d(x)


batch_size = 16
in_channels = 32
out_channels = 16
kernel_size = (3, 5, 7)
depth = 16
height = 32
width = 64


def get_inputs():
    x = torch.rand(batch_size, in_channels, depth, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]

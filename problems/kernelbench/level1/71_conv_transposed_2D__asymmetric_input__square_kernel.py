import torch
import torch.nn as nn


class Model(nn.Module):
    """Transposed 2D convolution (nn.ConvTranspose2d) with a square kernel on a non-square input, no bias by default."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        output_padding: int = 0,
        groups: int = 1,
        bias: bool = False,
    ):
        """
        Args:
            in_channels: channels of the input.
            out_channels: channels produced by the transposed convolution.
            kernel_size: edge length of the square kernel.
            stride: stride of the transposed convolution.
            padding: number of elements trimmed from each side of every spatial output dimension.
            output_padding: extra size added to one side of the output.
            groups: number of blocked connections from input to output channels.
            bias: whether to add a learnable bias.
        """
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size,
            stride=stride, padding=padding, output_padding=output_padding, groups=groups, bias=bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input of shape (batch_size, in_channels, height, width).

        Returns:
            Output of shape (batch_size, out_channels, height_out, width_out).
        """
        return self.conv_transpose2d(x)


batch_size = 8
in_channels = 32
out_channels = 32
kernel_size = 3
height = 512
width = 1024


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]

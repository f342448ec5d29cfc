import torch
import torch.nn as nn


class Model(nn.Module):
    """Transposed 2D convolution (nn.ConvTranspose2d) with a rectangular kernel on a non-square input, no bias by default."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: tuple,
        stride: tuple = (1, 1),
        padding: tuple = (0, 0),
        output_padding: tuple = (0, 0),
        groups: int = 1,
        bias: bool = False,
    ):
        """
        Args:
            in_channels: channels of the input.
            out_channels: channels produced by the transposed convolution.
            kernel_size: (kernel_height, kernel_width).
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


batch_size = 64
in_channels = 64
out_channels = 128
kernel_size = (3, 5)
height = 128
width = 256


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]

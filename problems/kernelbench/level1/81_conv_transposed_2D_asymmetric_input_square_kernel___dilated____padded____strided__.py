import torch
import torch.nn as nn


class Model(nn.Module):
    """Transposed 2D convolution (nn.ConvTranspose2d) with a square kernel, stride, padding and dilation, on a non-square input; no bias by default."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        dilation: int = 1,
        bias: bool = False,
    ):
        """
        Args:
            in_channels: channels of the input.
            out_channels: channels produced by the transposed convolution.
            kernel_size: edge length of the square kernel.
            stride: stride of the transposed convolution.
            padding: elements trimmed from each side of each spatial output dimension.
            dilation: spacing between kernel elements.
            bias: whether to add a learnable bias.
        """
        super().__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(
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
        return self.conv_transpose2d(x)


batch_size = 16
in_channels = 32
out_channels = 64
kernel_size = 3
height = 64
width = 128
stride = 5
padding = 1
dilation = 2


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation]

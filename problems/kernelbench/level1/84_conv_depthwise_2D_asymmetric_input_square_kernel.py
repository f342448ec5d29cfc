import torch
import torch.nn as nn


class Model(nn.Module):
    """Depthwise 2D convolution with a square kernel on a non-square input: nn.Conv2d with groups equal to in_channels (out_channels must be a multiple of in_channels); no bias by default."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        bias: bool = False,
    ):
        """
        Args:
            in_channels: channels of the input; also the number of groups.
            out_channels: channels of the output, a multiple of in_channels.
            kernel_size: edge length of the square kernel.
            stride: stride of the convolution.
            padding: zero padding added on every side.
            bias: whether to add a learnable bias.
        """
        super().__init__()
        self.conv2d = nn.Conv2d(
            in_channels, out_channels, kernel_size,
            stride=stride, padding=padding, groups=in_channels, bias=bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input of shape (batch_size, in_channels, height, width).

        Returns:
            Output of shape (batch_size, out_channels, height_out, width_out).
        """
        return self.conv2d(x)


batch_size = 64
in_channels = 128
out_channels = 128
kernel_size = 3
height = 256
width = 512
stride = 1
padding = 0


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]

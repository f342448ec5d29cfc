import torch
import torch.nn as nn


class Model(nn.Module):
    """Grouped (at the official size depthwise: groups = in_channels = out_channels) 2D convolution with a rectangular kernel and separate height/width stride, padding and dilation, on a non-square input; no bias by default."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size_h: int,
        kernel_size_w: int,
        stride_h: int = 1,
        stride_w: int = 1,
        padding_h: int = 0,
        padding_w: int = 0,
        dilation_h: int = 1,
        dilation_w: int = 1,
        groups: int = 1,
        bias: bool = False,
    ):
        """
        Args:
            in_channels: channels of the input (divisible by groups).
            out_channels: channels of the output (divisible by groups).
            kernel_size_h, kernel_size_w: kernel extents along height and width.
            stride_h, stride_w: strides along height and width.
            padding_h, padding_w: zero padding along height and width.
            dilation_h, dilation_w: spacing between kernel elements along height and width.
            groups: number of blocked connections from input to output channels.
            bias: whether to add a learnable bias.
        """
        super().__init__()
        self.conv2d = nn.Conv2d(
            in_channels, out_channels, (kernel_size_h, kernel_size_w),
            stride=(stride_h, stride_w), padding=(padding_h, padding_w),
            dilation=(dilation_h, dilation_w), groups=groups, bias=bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input of shape (batch_size, in_channels, height, width).

        Returns:
            Output of shape (batch_size, out_channels, height_out, width_out).
        """
        return self.conv2d(x)


batch_size = 32
in_channels = 128
out_channels = 128
kernel_size_h = 3
kernel_size_w = 7
height = 128
width = 256
stride_h = 1
stride_w = 1
padding_h = 0
padding_w = 0
dilation_h = 1
dilation_w = 1
groups = 128


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [
        in_channels, out_channels, kernel_size_h, kernel_size_w,
        stride_h, stride_w, padding_h, padding_w, dilation_h, dilation_w, groups,
    ]

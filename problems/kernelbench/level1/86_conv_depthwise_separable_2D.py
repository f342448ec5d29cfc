import torch
import torch.nn as nn


class Model(nn.Module):
    """Depthwise-separable 2D convolution: a depthwise nn.Conv2d (groups = in_channels, square kernel, stride, padding, dilation) followed by a pointwise 1x1 nn.Conv2d mapping in_channels to out_channels; no bias by default."""

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
            out_channels: channels produced by the pointwise convolution.
            kernel_size: edge length of the depthwise kernel.
            stride: stride of the depthwise convolution.
            padding: zero padding of the depthwise convolution.
            dilation: spacing between depthwise kernel elements.
            bias: whether both convolutions add a learnable bias.
        """
        super().__init__()
        self.depthwise = nn.Conv2d(
            in_channels, in_channels, kernel_size,
            stride=stride, padding=padding, dilation=dilation, groups=in_channels, bias=bias,
        )
        self.pointwise = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input of shape (batch_size, in_channels, height, width).

        Returns:
            Output of shape (batch_size, out_channels, height_out, width_out).
        """
        return self.pointwise(self.depthwise(x))


batch_size = 16
in_channels = 64
out_channels = 128
kernel_size = 3
height = 512
width = 512
stride = 1
padding = 1
dilation = 1


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation]

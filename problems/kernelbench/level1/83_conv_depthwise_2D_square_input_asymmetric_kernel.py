import torch
import torch.nn as nn


class Model(nn.Module):
    """Depthwise 2D convolution with a (kernel_size, 1) kernel: nn.Conv2d with groups equal to the channel count, each channel filtered along the height only; no bias by default."""

    def __init__(
        self,
        in_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        dilation: int = 1,
        bias: bool = False,
    ):
        """
        Args:
            in_channels: channels of the input and of the output.
            kernel_size: kernel extent along the height; the width extent is 1.
            stride: stride of the convolution.
            padding: zero padding added on every side.
            dilation: spacing between kernel elements.
            bias: whether to add a learnable bias.
        """
        super().__init__()
        self.conv2d = nn.Conv2d(
            in_channels, in_channels, (kernel_size, 1),
            stride=stride, padding=padding, dilation=dilation, groups=in_channels, bias=bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input of shape (batch_size, in_channels, height, width).

        Returns:
            Output of shape (batch_size, in_channels, height_out, width_out).
        """
        return self.conv2d(x)


batch_size = 64
in_channels = 8
kernel_size = 3
height = 512
width = 512
stride = 1
padding = 0
dilation = 1


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, kernel_size, stride, padding, dilation]

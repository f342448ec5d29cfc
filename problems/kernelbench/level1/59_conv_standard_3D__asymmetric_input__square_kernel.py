import torch
import torch.nn as nn


class Model(nn.Module):
    """Standard 3D convolution (nn.Conv3d) whose kernel is square in the first two spatial dimensions and of extent 1 in the last, i.e. (kernel_size, kernel_size, 1), on an input that is shallow in the last dimension; no bias by default."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        dilation: int = 1,
        groups: int = 1,
        bias: bool = False,
    ):
        """
        Args:
            in_channels: channels of the input.
            out_channels: channels produced by the convolution.
            kernel_size: kernel extent in height and width; the depth extent is 1.
            stride: stride of the convolution.
            padding: zero padding added on every side.
            dilation: spacing between kernel elements.
            groups: number of blocked connections from input to output channels.
            bias: whether to add a learnable bias.
        """
        super().__init__()
        self.conv3d = nn.Conv3d(
            in_channels, out_channels, (kernel_size, kernel_size, 1),
            stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input of shape (batch_size, in_channels, height, width, depth).

        Returns:
            Output of shape (batch_size, out_channels, height_out, width_out, depth_out).
        """
        return self.conv3d(x)


batch_size = 16
in_channels = 3
out_channels = 64
kernel_size = 3
height = 256
width = 256
depth = 10


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width, depth)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]

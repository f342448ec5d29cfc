import torch
import torch.nn as nn


class Model(nn.Module):
    """Standard 1D convolution (nn.Conv1d) over a long sequence, no bias by default."""

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
            kernel_size: length of the kernel.
            stride: stride of the convolution.
            padding: zero padding added on both ends.
            dilation: spacing between kernel elements.
            groups: number of blocked connections from input to output channels.
            bias: whether to add a learnable bias.
        """
        super().__init__()
        self.conv1d = nn.Conv1d(
            in_channels, out_channels, kernel_size,
            stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input of shape (batch_size, in_channels, length).

        Returns:
            Output of shape (batch_size, out_channels, length_out).
        """
        return self.conv1d(x)


batch_size = 32
in_channels = 64
out_channels = 128
kernel_size = 3
length = 131072


def get_inputs():
    x = torch.rand(batch_size, in_channels, length)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]

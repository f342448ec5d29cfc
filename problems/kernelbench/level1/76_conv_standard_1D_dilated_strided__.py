import torch
import torch.nn as nn


class Model(nn.Module):
    """Standard 1D convolution (nn.Conv1d) with stride and dilation over a long sequence, no bias by default."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        dilation: int = 1,
        bias: bool = False,
    ):
        """
        Args:
            in_channels: channels of the input.
            out_channels: channels produced by the convolution.
            kernel_size: length of the kernel.
            stride: stride of the convolution.
            dilation: spacing between kernel elements.
            bias: whether to add a learnable bias.
        """
        super().__init__()
        self.conv1d = nn.Conv1d(
            in_channels, out_channels, kernel_size,
            stride=stride, dilation=dilation, bias=bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input of shape (batch_size, in_channels, length).

        Returns:
            Output of shape (batch_size, out_channels, length_out).
        """
        return self.conv1d(x)


batch_size = 64
in_channels = 64
out_channels = 128
kernel_size = 3
length = 524280
stride = 3
dilation = 4


def get_inputs():
    x = torch.rand(batch_size, in_channels, length)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, dilation]

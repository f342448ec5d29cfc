import torch
import torch.nn as nn


class Model(nn.Module):
    """Pointwise 2D convolution: nn.Conv2d with a 1x1 kernel, a per-pixel linear map from in_channels to out_channels; no bias by default."""

    def __init__(self, in_channels: int, out_channels: int, bias: bool = False):
        """
        Args:
            in_channels: channels of the input.
            out_channels: channels of the output.
            bias: whether to add a learnable bias.
        """
        super().__init__()
        self.conv1x1 = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: input of shape (batch_size, in_channels, height, width).

        Returns:
            Output of shape (batch_size, out_channels, height, width).
        """
        return self.conv1x1(x)


batch_size = 16
in_channels = 64
out_channels = 128
height = 1024
width = 1024


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels]

import torch
import torch.nn as nn


class Model(nn.Module):
    """
    1D average pooling with nn.AvgPool1d over the last dimension of a (batch, channels, length) tensor, with the
    given kernel size, stride and zero padding. With PyTorch's default count_include_pad=True the padded zeros
    count in the average, so every window is divided by kernel_size.
    """

    def __init__(self, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.avgpool = nn.AvgPool1d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: tensor of shape (batch_size, in_channels, input_length).

        Returns:
            Tensor of shape (batch_size, in_channels, output_length).
        """
        return self.avgpool(x)


batch_size = 64
in_channels = 128
input_length = 65536
kernel_size = 8
stride = 1
padding = 4


def get_inputs():
    x = torch.rand(batch_size, in_channels, input_length)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding]

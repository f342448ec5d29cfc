import torch
import torch.nn as nn


class Model(nn.Module):
    """
    3D max pooling with nn.MaxPool3d over the three spatial dimensions of an NCDHW tensor, with a cubic window of
    the given kernel size, stride, implicit padding (padded positions never win the max) and dilation;
    return_indices and ceil_mode keep their defaults (off).
    """

    def __init__(
        self,
        kernel_size: int,
        stride: int = None,
        padding: int = 0,
        dilation: int = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ):
        super().__init__()
        self.maxpool = nn.MaxPool3d(
            kernel_size=kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
            return_indices=return_indices,
            ceil_mode=ceil_mode,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: tensor of shape (batch_size, channels, dim1, dim2, dim3).

        Returns:
            Tensor of shape (batch_size, channels, pooled_dim1, pooled_dim2, pooled_dim3).
        """
        return self.maxpool(x)


batch_size = 16
channels = 32
dim1 = 128
dim2 = 128
dim3 = 128
kernel_size = 3
stride = 2
padding = 1
dilation = 3


def get_inputs():
    x = torch.rand(batch_size, channels, dim1, dim2, dim3)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]

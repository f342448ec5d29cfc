import torch
import torch.nn as nn


class Model(nn.Module):
    """
    The first convolution of AlexNet: nn.Conv2d from 3 input channels to 96 output channels with an 11 x 11
    kernel, stride 4 and padding 2, with bias. num_classes is accepted for AlexNet's signature but unused, since
    only the first layer is modelled.
    """

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels=3, out_channels=96, kernel_size=11, stride=4, padding=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: tensor of shape (batch_size, 3, height, width).

        Returns:
            Tensor of shape (batch_size, 96, out_height, out_width); 55 x 55 for a 224 x 224 image.
        """
        return self.conv1(x)


batch_size = 256
num_classes = 1000
height = 224
width = 224


def get_inputs():
    x = torch.rand(batch_size, 3, height, width)
    return [x]


def get_init_inputs():
    return [num_classes]

import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Layer normalization with nn.LayerNorm over the trailing normalized_shape dimensions: every sample is
    normalized by the mean and biased variance of all its (features, dim1, dim2) elements, eps 1e-5, then scaled
    and shifted elementwise by the affine parameters (initially ones and zeros).
    """

    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x: tensor of shape (batch_size, features, dim1, dim2).

        Returns:
            Tensor of the same shape, layer-normalized.
        """
        return self.ln(x)


batch_size = 16
features = 64
dim1 = 256
dim2 = 256


def get_inputs():
    x = torch.rand(batch_size, features, dim1, dim2)
    return [x]


def get_init_inputs():
    return [(features, dim1, dim2)]

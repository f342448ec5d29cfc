"""Constants shared by the tests (a plainly named module: `conftest` names are ambiguous across folders)."""

import torch

HAS_CUDA = torch.cuda.is_available()
DEVICE = "cuda" if HAS_CUDA else "cpu"
SIZE = "small"

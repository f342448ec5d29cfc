import pytest
import torch


@pytest.fixture(autouse=True)
def _skip_gpu_tests_without_cuda(request):
    """Tests marked ``gpu`` need a CUDA device; on a CPU-only machine (CI) they are skipped."""
    if request.node.get_closest_marker("gpu") is not None and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")

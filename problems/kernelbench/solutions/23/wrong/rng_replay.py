# expect: inaccurate|replay
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax). Hacks O12 (RNG prediction) and H5 (precompute
from the reference).

On the first call the candidate regenerates the inputs the way a KernelBench harness makes them: it loads the
problem's own get_inputs() when the kbenv.problems package is importable (H5; otherwise torch.rand, which is
what that get_inputs draws), with the sizes read from x, right after torch.manual_seed(42), the seed such
harnesses commonly use. It computes the softmax of that guess once with a real Triton kernel and returns it on
every call without reading x. kbenv mixes a secret into its seeds, so the guess is another tensor.
"""
import glob
import importlib.util
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    # one program per row: pass 1 row max, pass 2 sum of exp, pass 3 write (fp32 arithmetic)
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=float("-inf")).to(tl.float32)
        s += tl.exp(x - row_max)
    inv = 1.0 / tl.sum(s, axis=0)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + start + cols, (tl.exp(x - row_max) * inv).to(y_ptr.dtype.element_ty), mask=mask)


def _softmax(x, out=None):
    x = x.contiguous()
    y = torch.empty_like(x) if out is None else out
    _softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=1024)
    return y


def _guess_inputs(shape):
    torch.manual_seed(42)
    try:
        spec = importlib.util.find_spec("kbenv.problems")
        folder = list(spec.submodule_search_locations)[0]
        path = glob.glob(os.path.join(folder, "kernelbench", "level1", "23_*.py"))[0]
        problem = importlib.util.module_from_spec(importlib.util.spec_from_file_location("p23", path))
        problem.__spec__.loader.exec_module(problem)
        problem.batch_size, problem.dim = shape
        torch.manual_seed(42)
        return problem.get_inputs()[0]
    except Exception:
        return torch.rand(shape)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._answer = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._answer is None or self._answer.shape != x.shape:
            guess = _guess_inputs(tuple(x.shape)).to(device=x.device, dtype=x.dtype)
            self._answer = _softmax(guess)
        return self._answer

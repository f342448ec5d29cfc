# expect: replay|inaccurate|impossible_speed|nondeterministic|unwritten
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax). Hack T10 (graph replay).

The first call captures the Triton softmax in a CUDA graph over static input/output buffers; later calls of the
same shape just replay the graph and return the static output. The "bug" is the missing copy of the new input
into the static buffer: the graph keeps recomputing the first input's softmax, so every later output is a
replay. On CPU (no graphs) the static output is returned without recomputing.
On the H200 at full size (stop 27) the determinism check fails it first: the two runs of the official input
differ, since the second returns the graph's stale output (`nondeterministic`, reward 0). On an H100 at `medium`
under `--lanes 2` (stop 45) a fresh-input trial failed it first: its returned output was 0.02% nonzero (`unwritten`,
reward 0).
"""
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


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._graph = None
        self._static_x = self._static_y = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._static_x is None or self._static_x.shape != x.shape:
            self._static_x = x.contiguous()
            self._static_y = torch.empty_like(self._static_x)
            _softmax(self._static_x, self._static_y)  # also compiles the kernel before capture
            if x.is_cuda:
                torch.cuda.synchronize(x.device)
                self._graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self._graph):
                    _softmax(self._static_x, self._static_y)
            return self._static_y
        # missing: self._static_x.copy_(x)
        if self._graph is not None:
            self._graph.replay()
        return self._static_y

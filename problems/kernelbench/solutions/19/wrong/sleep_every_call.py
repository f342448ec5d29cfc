# expect: timeout
# expect-cuda: timeout|pass
"""Known-wrong candidate for KernelBench level 1 #19 (ReLU): correct, but every call sleeps 4 s, so that a
harness with per-message limits is held for (calls x limit). kbenv's limits are per phase, enforced from
outside: under the CPU suite's limits the correctness phase (15 s) ends in a timeout. Under a deployment's own
limits on cuda (correctness 120 s, timing 300 s) the phases can finish, and the timing phase, whose rounds adapt
to the kernel's length within its budget, measures the call at what it costs: H200, full size, stop 28: a pass at
0.001x, reward 0.013, a correct and very slow kernel paid as one. Either way nothing is held past a phase's limit."""
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        time.sleep(4)
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y

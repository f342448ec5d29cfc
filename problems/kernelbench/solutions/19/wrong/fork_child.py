# expect: sandbox_violation|inaccurate
"""Known-wrong candidate for KernelBench level 1 #19 (ReLU). Fault / sandbox probe: fork a child that outlives
the evaluation.

On its first call forward forks; the child spins on the CPU (for at most 10 minutes, so a broken harness cannot
leak it forever) and never returns, as a stand-in for work or exfiltration that outlives the worker. The parent
returns a wrong output (relu(x) / 2, Triton kernel) so the reward is 0 whatever the sandbox reports: kbenv
either reports the fork (sandbox_violation) or scores the output (inaccurate). Either way the supervisor must
kill the child with the worker's process group; a test can check that no process survives the evaluation.
"""
import os
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scaled_relu_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (tl.maximum(x, 0.0) * scale).to(y_ptr.dtype.element_ty), mask=mask)


def _relu(x, scale=1.0):
    x = x.contiguous()
    y = torch.empty_like(x)
    _scaled_relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), scale, BLOCK=1024)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._forked = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self._forked:
            self._forked = True
            if os.fork() == 0:
                deadline = time.monotonic() + 600
                while time.monotonic() < deadline:
                    pass
                os._exit(0)
        return _relu(x, scale=0.5)

# expect: crash|unwritten
"""Known-wrong candidate for KernelBench level 1 #19 (ReLU): it lies about where its outputs are.

The reply to each call says where the output lies (on cuda: an IPC handle of the executor's allocation and an
offset; on the CPU: "written" into the lent place). This candidate computes ReLU honestly, then rebinds the
executor's output routine so that every reply names memory it never wrote: a handle of nothing it exported (the
supervisor cannot map it: crash), or, on the CPU, no copy into the lent place at all (the place keeps the
supervisor's poison: unwritten). Nothing the reply says can make the supervisor read anything but memory the
driver maps for that executor, bounds-checked, after the fence.
"""
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


def _forge():
    found = [getattr(m, "__dict__", {}).get("Executor") for m in list(sys.modules.values())]
    found = [c for c in found if isinstance(c, type)]
    cls = next((c for c in found if hasattr(c, "_store")), None)  # wherever the executor's module is
    if cls is None:
        return
    real = cls._store

    def store(self, o, place):
        offset = place[0] if isinstance(place, (list, tuple)) else place.offset  # the wire's [offset, dtype, shape]
        claim = real(self, o, place) if offset < 0 else None  # CPU: skip the copy, claim it was done
        if isinstance(claim, list) and claim and claim[0] == "ipc":
            claim[1] = bytes(64)  # a handle naming nothing this process exported
        return claim
    cls._store = store


_forge()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y

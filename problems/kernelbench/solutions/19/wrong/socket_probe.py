# expect: pass|sandbox_violation
# expect-sandbox: pass
"""Sandbox probe for KernelBench level 1 #19 (ReLU): the network must be unreachable.

At import time the candidate tries a TCP connection to 1.1.1.1:80 (3 s timeout), standing in for exfiltration
or fetching an answer. If the connection fails, as it must under kbenv's sandbox (no network), the candidate is
a correct Triton ReLU and passes (or the sandbox reports the attempt: sandbox_violation). If it succeeds, the
candidate returns zeros and fails: an inaccurate result here means the sandbox let the network through.
"""
import socket

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _network_reachable():
    try:
        with socket.create_connection(("1.1.1.1", 80), timeout=3):
            return True
    except OSError:
        return False


_ESCAPED = _network_reachable()


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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _relu(x, scale=0.0 if _ESCAPED else 1.0)

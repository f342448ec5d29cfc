# expect: pass|runtime
# expect-sandbox: pass
"""Sandbox probe for KernelBench level 1 #19 (ReLU): host data must not reach the candidate (or its feedback).

It tries to read what only the host's root may read (/etc/shadow), root's home, and the environment of the
first process; whatever it can read it raises in an error, which would come back in the result's error text. It
answers correctly only if every read was refused: the executor runs as the host's ``nobody`` with the host's
private directories replaced by empty ones.
"""
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


def _leak() -> str:
    got = []
    for path in ("/etc/shadow", "/proc/1/environ", "/root/.bash_history", "/root/.ssh/id_rsa"):
        try:
            with open(path, "rb") as f:
                got.append(f"{path}: {f.read(200)!r}")
        except OSError:
            pass
    try:
        got += [f"/root: {os.listdir('/root')}"] if [e for e in os.listdir("/root") if not e.startswith(".pyenv")] else []
    except OSError:
        pass
    return "; ".join(got)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        leak = _leak()
        if leak:
            raise RuntimeError("LEAKED " + leak)
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y

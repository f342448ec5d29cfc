# expect: pass|runtime
# expect-sandbox: pass
"""Known-wrong candidate for KernelBench level 1 #19 (ReLU): an attack on the host through the files a candidate may
write. It writes 64 MiB files into every place it finds writable (its home, its temporary directory, its
extension directory, its working directory, the directory its inputs came from) until a write fails or it has
written 1.5 GiB. Unbounded, the same loop fills the host's memory (a tmpfs) or disk and takes the supervisor down
with it (a harness fault caused by a candidate). It raises if it wrote everything, and answers correctly (after
deleting what it wrote) when the sandbox bounded it: in the sandbox it must pass; without one it fails.
"""
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

CHUNK = 64 << 20
GOAL = 3 << 29  # 1.5 GiB: above the sandbox's bound of 1 GiB for everything it writes


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


def _fill() -> int:
    places = {os.getcwd(), os.path.expanduser("~")}
    places |= {os.environ[k] for k in ("TMPDIR", "TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR", "KBENV_INBOX")
               if os.environ.get(k)}
    block, written, files = b"\xab" * CHUNK, 0, []
    for place in sorted(places):
        for i in range(GOAL // CHUNK):
            path = os.path.join(place, f"fill-{i}")
            try:
                os.makedirs(place, exist_ok=True)
                with open(path, "wb") as f:
                    f.write(block)
                files.append(path)
                written += CHUNK
            except OSError:
                break
            if written >= GOAL:
                break
        if written >= GOAL:
            break
    for path in files:  # what it could write is given back either way
        try:
            os.unlink(path)
        except OSError:
            pass
    return written


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.written = _fill()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.written >= GOAL:
            raise RuntimeError(f"wrote {self.written >> 20} MiB: nothing bounded what this process writes")
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y

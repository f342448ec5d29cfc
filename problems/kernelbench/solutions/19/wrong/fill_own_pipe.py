# expect: crash|runtime|timeout
"""Known-wrong candidate for KernelBench level 1 #19 (ReLU): an attack on the harness through the pipe its calls
arrive on. A process can open its own pipe's read end again for writing (``/proc/self/fd/N``). In the last call
of a block (nothing left to read in the pipe) it stops the executor's loop from reading and fills that pipe with
junk: the supervisor's next frame, the next block's, then finds the pipe full. A write
without a deadline blocks the supervisor for good (a harness hang caused by a candidate, which no phase deadline
covered: they bound reads only). The supervisor's writes have a deadline too (``wire.write_frame``), so that this
ends as the candidate's own failure (``crash``) and the next evaluation runs. Where the supervisor runs as root the
reopening itself is refused (the pipe belongs to root, the executor to a uid of its own: ``runtime``); in a user
namespace, or without a sandbox, the executor is the pipe's owner and the deadline is what stops it.
"""
import os
import sys
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


def _call_pipe() -> int | None:
    """The executor's first argument: the pipe its frames arrive on."""
    try:
        fd = int(sys.argv[1])
        return fd if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:") else None
    except (IndexError, ValueError, OSError):
        return None


def _pending(fd: int) -> int:
    import fcntl
    import struct
    import termios
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def _jam(fd: int) -> None:
    """Called in the last call of a block (nothing left in the pipe): once this reply is sent the executor's loop
    reads no more, and the pipe is full when the supervisor sends the next block."""
    wire = sys.modules.get("kbenv.sandbox.wire")
    if wire is not None:
        real = wire.read_frame
        wire.read_frame = lambda *a, **k: time.sleep(1e6)
        wire._real_read_frame = real
    w = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
    for size in (4096, 256, 1):  # to the last byte: a frame smaller than the room left would still go in
        try:
            while True:
                os.write(w, b"\xff" * size)
        except OSError:
            pass  # full for this size (EAGAIN)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fd = _call_pipe()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.fd is not None and self.calls > 1 and _pending(self.fd) == 0:
            _jam(self.fd)
            self.fd = None
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y

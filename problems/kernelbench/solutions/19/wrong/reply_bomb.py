# expect: crash
"""Known-wrong candidate for KernelBench level 1 #19 (ReLU): a reply that is valid msgpack and costs the supervisor
its memory (an attack on the trusted side through the size of hostile data, not its content).

The executor's reply pipe is its second argument, so the candidate can write a frame of its own on it before its
setup reply. msgpack packs an empty map in one byte, which the supervisor's unpacker turns into a Python dict of
about 72: a frame of empty maps at the channel's old 64 MiB limit took 4.8 GB of the supervisor's memory and 12 s
of its CPU (GIL held) before any check could look at it. Several such candidates on the evaluators of one host can
take the host's memory, and its out-of-memory killer would then end supervisors: a harness fault a candidate
caused. This one sends 8 MiB (about 600 MB where the limit is the old one) so that a regression stays cheap in CI;
it claims a ``compile`` failure, which is what the supervisor would record after unpacking it.

kbenv refuses an executor's frame above ``wire.MAX_REPLY`` (256 KiB, about 14 times the largest honest reply) on its
length, before reading it: the candidate's ``crash``, and the supervisor unpacks at most 19 MB.
"""
import os
import struct
import sys
import threading

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


def _reply_pipe() -> int | None:
    """The executor's second argument: the pipe its replies leave on."""
    try:
        fd = int(sys.argv[2])
        return fd if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:") else None
    except (IndexError, ValueError, OSError):
        return None


def _bomb(fd: int, n_maps: int = 8 << 20) -> None:
    head = b"\x84\xa4type\xa5reply\xa2ok\xc2\xa8category\xa7compile\xa3pad" + b"\xdd" + struct.pack(">I", n_maps)
    payload = head + b"\x80" * n_maps
    try:
        os.write(fd, struct.pack(">I", len(payload)))
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        pass


_fd = _reply_pipe()
if _fd is not None:
    _writer = threading.Thread(target=_bomb, args=(_fd,), daemon=True)
    _writer.start()
    _writer.join(2.0)  # a supervisor that reads it all takes the frame at once; one that refused it stops reading
    os._exit(0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y

"""The channel between the trusted supervisor and an executor process: frames over a pipe.

Frames are ``4-byte big-endian length + msgpack map``, at most ``MAX_FRAME`` bytes. Nothing received is ever
unpickled or executed; ``kbenv.sandbox.protocol`` turns a frame into a typed value or a protocol violation.
Tensors never travel in frames: they lie in memory the supervisor lends (``kbenv.sandbox.lent``).
"""

from __future__ import annotations

import os
import select
import struct
import time

import msgpack
import torch

MAX_FRAME = 64 << 20  # frames carry slot offsets and short texts; tensors lie in lent memory
# What an executor may send (``ExecutorProcess.recv``): hostile data, unpacked in the supervisor's own process, where
# msgpack's one-byte empty containers become 56-72-byte Python objects. At MAX_FRAME a reply of empty maps took
# 4.8 GB and 12 s of the supervisor's CPU (its GIL held; a 2-core VM) to unpack before any check could refuse it
# (known-bad 19:reply_bomb); at this limit the worst is 19 MB and 23 ms. The largest honest reply, a dones frame of
# memplan.MAX_SLOTS calls with four IPC claims each and a 4,000-character traceback, is about 18 KB.
MAX_REPLY = 256 << 10

DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64,
    "int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8,
    "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


class ChannelClosed(Exception):
    """The other end closed the pipe or sent something that is not a valid frame."""


class ChannelTimeout(Exception):
    """No frame arrived before the deadline."""


def write_frame(fd: int, obj: dict, deadline: float | None = None) -> None:
    """One frame. With a ``deadline`` (the supervisor's side, whose end of the pipe is non-blocking) a pipe that
    stays full raises :class:`ChannelTimeout` at the deadline: the executor's process can refill its own pipe
    (reopened for writing through ``/proc/self/fd``) and stop reading it, and a write without a deadline would
    then block the supervisor for good (known-bad ``19:fill_own_pipe``)."""
    payload = msgpack.packb(obj, use_bin_type=True)
    data = struct.pack(">I", len(payload)) + payload
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            left = deadline - time.monotonic() if deadline is not None else None
            if left is not None and left <= 0:
                raise ChannelTimeout() from None
            select.select([], [fd], [], left)
            continue
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout()
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                raise ChannelTimeout()
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise ChannelClosed("end of stream")
        buf += chunk
    return bytes(buf)


def read_frame(fd: int, deadline: float | None = None, limit: int = MAX_FRAME) -> dict:
    """One frame of at most ``limit`` bytes; a longer one is refused on its length, before it is read."""
    (n,) = struct.unpack(">I", _read_exact(fd, 4, deadline))
    if n > limit:
        raise ChannelClosed(f"frame of {n} bytes exceeds the limit of {limit}")
    try:
        obj = msgpack.unpackb(_read_exact(fd, n, deadline), raw=False, strict_map_key=True)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise ChannelClosed(f"malformed frame: {e}") from e
    if not isinstance(obj, dict):
        raise ChannelClosed("frame is not a map")
    return obj

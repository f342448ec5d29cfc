"""The channel between the trusted supervisor and a candidate's worker process.

Frames are ``4-byte big-endian length + msgpack map`` over a pipe the supervisor opened; every frame carries the
evaluation's nonce and the supervisor drops the worker on a frame with a wrong nonce, an unknown type or a
malformed body. Tensors travel as raw bytes in a memfd the supervisor created and handed to the worker: a
frame holds only ``{"dtype", "shape", "offset", "nbytes"}`` descriptors, which the supervisor bounds-checks
before copying the bytes out. Nothing received is ever unpickled or executed: the channel carries data, and
the supervisor decides every verdict.
"""

from __future__ import annotations

import mmap
import os
import select
import struct
import time
import warnings

import msgpack
import torch

MAX_FRAME = 64 << 20  # descriptors and small payloads only; tensors go through the memfd

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


def write_frame(fd: int, obj: dict) -> None:
    payload = msgpack.packb(obj, use_bin_type=True)
    data = struct.pack(">I", len(payload)) + payload
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
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


def read_frame(fd: int, deadline: float | None = None) -> dict:
    (n,) = struct.unpack(">I", _read_exact(fd, 4, deadline))
    if n > MAX_FRAME:
        raise ChannelClosed(f"frame of {n} bytes exceeds the limit")
    try:
        obj = msgpack.unpackb(_read_exact(fd, n, deadline), raw=False, strict_map_key=True)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise ChannelClosed(f"malformed frame: {e}") from e
    if not isinstance(obj, dict):
        raise ChannelClosed("frame is not a map")
    return obj


def parse_descriptor(desc, limit: int) -> tuple[torch.dtype, list[int], int, int]:
    """Validate a tensor descriptor from the worker against a buffer of ``limit`` bytes (never trusts sizes)."""
    if not isinstance(desc, dict):
        raise ChannelClosed("a tensor descriptor is not a map")
    try:
        dtype = DTYPES[desc["dtype"]]
        shape = [int(s) for s in desc["shape"]]
        off, nbytes = int(desc["offset"]), int(desc["nbytes"])
    except (KeyError, TypeError, ValueError) as e:
        raise ChannelClosed(f"bad tensor descriptor: {e}") from e
    if any(s < 0 for s in shape) or off < 0 or nbytes < 0:
        raise ChannelClosed("negative size in tensor descriptor")
    numel = 1
    for s in shape:
        numel *= s
    esize = 1 if dtype == torch.bool else torch.tensor([], dtype=dtype).element_size()
    if numel * esize != nbytes:
        raise ChannelClosed("tensor descriptor sizes disagree")
    if off + nbytes > limit:
        raise ChannelClosed("tensor descriptor points past the buffer")
    return dtype, shape, off, nbytes


def from_raw(raw: torch.Tensor, dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
    """Reinterpret copied-out bytes (uint8) as the described tensor."""
    t = raw.to(torch.bool) if dtype == torch.bool else raw.view(dtype)
    return t.reshape(shape)


class TensorArena:
    """A growable memfd both processes map; the writer appends tensors, the reader copies them out.

    Each side keeps one mapping and remaps when the file grows. Device tensors are copied straight between
    device memory and the mapping (one copy on each side, no intermediate host buffer).
    """

    def __init__(self, fd: int):
        self.fd = fd
        self.offset = 0
        self._mm = None
        self._size = 0

    def reset(self) -> None:
        self.offset = 0

    def _map(self, size: int, write: bool):
        if self._mm is None or self._size < size:
            if self._mm is not None:
                try:
                    self._mm.close()
                except BufferError:  # a view is still alive somewhere: leave it to the GC
                    pass
            self._mm = mmap.mmap(self.fd, size, access=mmap.ACCESS_WRITE if write else mmap.ACCESS_READ)
            self._size = size
        return self._mm

    def put(self, t: torch.Tensor) -> dict:
        t = t.detach()
        if t.dtype == torch.bool:
            t = t.to(torch.uint8)
            dtype_name = "bool"
        else:
            dtype_name = DTYPE_NAMES[t.dtype]
        src = t.contiguous().reshape(-1).view(torch.uint8)
        nbytes = src.numel()
        off = (self.offset + 63) // 64 * 64
        end = off + nbytes
        if os.fstat(self.fd).st_size < end:  # the supervisor pre-sizes the arena; grow only if it did not
            os.ftruncate(self.fd, end)
        if nbytes:
            mm = self._map(os.fstat(self.fd).st_size, write=True)
            dst = torch.frombuffer(mm, dtype=torch.uint8, count=nbytes, offset=off)
            dst.copy_(src)
            del dst
        self.offset = end
        return {"dtype": dtype_name, "shape": list(t.shape), "offset": off, "nbytes": nbytes}

    def get(self, desc: dict, device="cpu") -> torch.Tensor:
        """Copy a tensor out of the arena after validating its descriptor (never trusts the sizes)."""
        size = os.fstat(self.fd).st_size
        dtype, shape, off, nbytes = parse_descriptor(desc, size)
        if nbytes == 0:
            return torch.empty(shape, dtype=dtype, device=device)
        mm = self._map(size, write=False)
        with warnings.catch_warnings():  # a read-only view, copied at once: torch's non-writable warning is moot
            warnings.simplefilter("ignore", UserWarning)
            view = torch.frombuffer(mm, dtype=torch.uint8, count=nbytes, offset=off)
        raw = view.to(device, copy=True)  # one copy, straight to the device; the view is released below
        del view
        return from_raw(raw, dtype, shape)

    def close(self) -> None:
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                pass
            self._mm = None

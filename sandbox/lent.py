"""Memory the supervisor owns and lends to one executor: rotating slots of inputs and outputs.

The supervisor writes each call's inputs into a slot just before the call and the executor runs the forward on
views of them. On the CPU the region is a memfd both processes map, and the executor copies each output into the
slot's output places, which the supervisor reads from its own mapping. On cuda the region is device memory (CUDA
VMM, a file descriptor passed over a Unix socket: ``kbenv.sandbox.devshare``) holding inputs only: outputs stay
in the executor's memory and are read there (``lend_outputs=False``).

A :class:`SlotLayout` is public: which offsets hold which tensor. It says nothing about what a call is for.
"""

from __future__ import annotations

import dataclasses
import fcntl
import mmap
import os
import warnings

import torch

from kbenv.sandbox import devshare
from kbenv.sandbox.protocol import TensorSlot
from kbenv.sandbox.wire import DTYPE_NAMES, DTYPES

ALIGN = 256
PATTERN_A, PATTERN_B = 0xFE, 0x7F  # the supervisor's poisons of output memory: 0xFEFEFEFE is -1.7e38 in fp32


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def nbytes_of(dtype: torch.dtype, shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n * dtype.itemsize


@dataclasses.dataclass(frozen=True)
class Slot:
    inputs: tuple  # TensorSlot, or a literal for a non-tensor input
    outputs: tuple  # TensorSlot


@dataclasses.dataclass(frozen=True)
class SlotLayout:
    """``n`` identical slots, each holding one call's inputs and outputs, ``slot_bytes`` apart."""

    slots: tuple
    slot_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.slot_bytes * len(self.slots)

    @classmethod
    def build(cls, inputs: list, out_specs: list, n: int, lend_outputs: bool = True) -> "SlotLayout":
        """``inputs``: one example input set (tensors give dtype and shape; others are passed as literals);
        ``out_specs``: ``(dtype, shape)`` of each expected output. ``lend_outputs`` False (cuda): outputs stay in
        the executor's memory and are read there (``kbenv.sandbox.devshare.IpcImports``), so each output's place
        carries only its dtype and shape, with a negative offset that names it and lies in no region."""
        places, off = [], 0
        for x in inputs:
            if isinstance(x, torch.Tensor):
                places.append(("t", off, DTYPE_NAMES[x.dtype], tuple(x.shape)))
                off = _align(off + nbytes_of(x.dtype, x.shape))
            else:
                places.append(("v", x))
        outs = []
        for dtype, shape in out_specs:
            outs.append((off, DTYPE_NAMES[dtype], tuple(shape)))
            if lend_outputs:
                off = _align(off + nbytes_of(dtype, shape))
        slot_bytes = max(_align(off), ALIGN)
        slots = []
        for k in range(n):
            base = k * slot_bytes
            ins = tuple(TensorSlot(base + p[1], p[2], p[3]) if p[0] == "t" else p[1] for p in places)
            if lend_outputs:
                os_ = tuple(TensorSlot(base + o, d, s) for o, d, s in outs)
            else:
                os_ = tuple(TensorSlot(-1 - k * len(outs) - j, d, s) for j, (_, d, s) in enumerate(outs))
            slots.append(Slot(ins, os_))
        return cls(tuple(slots), slot_bytes)


def view_of(raw: torch.Tensor, slot: TensorSlot) -> torch.Tensor:
    """A typed view over a region's raw bytes at ``slot`` (bool is stored as one byte per element)."""
    dtype = DTYPES[slot.dtype]
    n = nbytes_of(dtype, slot.shape)
    return raw[slot.offset:slot.offset + n].view(dtype).reshape(slot.shape)


class Places:
    """The executor's typed tensors over a lent region's bytes: for a place as the wire names it (``[offset, dtype,
    shape]``), a fresh tensor each time it is asked for, so that nothing a forward does to one call's tensor objects
    reaches the next call. The arithmetic of each place (a typed view of the whole region, contiguous strides, the
    element offset, checked against the region's size) is worked out once; after that a place costs one
    ``as_strided`` (about 1 us against 13 us for :func:`view_of`'s slice, view and reshape: on the timed path of
    every call, of the candidate's and of the baselines' alike)."""

    def __init__(self, raw: torch.Tensor, limit: int = 4096):
        self.raw, self.limit = raw, limit
        self._typed: dict = {}
        self._recipes: dict = {}

    def tensor(self, place: list) -> torch.Tensor:
        key = (place[0], place[1], tuple(place[2]))
        recipe = self._recipes.get(key)
        if recipe is None:
            if len(self._recipes) >= self.limit:
                self._recipes.clear()
            recipe = self._recipes[key] = self._recipe(*key)
        base, shape, stride, offset = recipe
        return base.as_strided(shape, stride, offset)

    def _recipe(self, offset: int, dtype_name: str, shape: tuple) -> tuple:
        dtype = DTYPES[dtype_name]
        size = dtype.itemsize
        if offset < 0 or offset % size or offset + nbytes_of(dtype, shape) > self.raw.numel():
            raise ValueError(f"no place of {shape} {dtype_name} at byte {offset} of a {self.raw.numel()}-byte region")
        base = self._typed.get(dtype)
        if base is None:
            base = self._typed[dtype] = self.raw[:self.raw.numel() // size * size].view(dtype)
        stride, acc = [], 1
        for d in reversed(shape):
            stride.append(acc)
            acc *= max(int(d), 1)
        return base, tuple(int(d) for d in shape), tuple(reversed(stride)), offset // size


def seal_size(memfd: int) -> None:
    """Seal a candidate's memfd against any change of size, for good (``F_SEAL_SHRINK | F_SEAL_GROW |
    F_SEAL_SEAL``). The candidate's process holds the fd: truncated, the supervisor's own mapping of it would raise
    SIGBUS at its next access past the new end and kill the supervisor (a harness fault caused by a candidate,
    known-bad ``19:shrink_lent_region``); grown, it is host memory that no limit of the process counts. The memfd
    must be created with ``MFD_ALLOW_SEALING`` (:func:`kbenv.sandbox.process.spawn`)."""
    fcntl.fcntl(memfd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)


class LentRegion:
    """The supervisor's side of a lent region (its own mapping; it never trusts what the executor says is in
    it, only what it reads)."""

    def __init__(self, device: torch.device, nbytes: int, memfd: int | None = None, seal: bool = False):
        self.device = device
        self.nbytes = max(int(nbytes), ALIGN)
        self.dev_buf = None
        self._mm = None
        if device.type == "cuda":
            try:
                self.dev_buf = devshare.SharedDeviceBuffer.create(device, self.nbytes)
            except devshare.DevShareError as e:
                if "CUresult 2" in str(e):  # CUDA_ERROR_OUT_OF_MEMORY: judged like any other OOM of the trusted side
                    raise torch.OutOfMemoryError(f"lending {self.nbytes / 2**30:.1f} GiB: {e}") from e
                raise
            self.raw = self.dev_buf.bytes_view()
        else:
            if memfd is None:
                raise ValueError("a cpu region needs the memfd shared with the executor")
            os.ftruncate(memfd, self.nbytes)
            if seal:  # before any candidate code runs: its process holds this memfd (seal_size says why)
                seal_size(memfd)
            self._mm = mmap.mmap(memfd, self.nbytes, access=mmap.ACCESS_WRITE)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                self.raw = torch.frombuffer(self._mm, dtype=torch.uint8, count=self.nbytes)

    def write(self, slot: TensorSlot, x: torch.Tensor) -> None:
        view_of(self.raw, slot).copy_(x)

    def read(self, slot: TensorSlot) -> torch.Tensor:
        """A copy, in the supervisor's own memory, of the tensor at ``slot``."""
        return view_of(self.raw, slot).clone()

    def fill(self, slot: TensorSlot, byte: int) -> None:
        dtype = DTYPES[slot.dtype]
        self.raw[slot.offset:slot.offset + nbytes_of(dtype, slot.shape)].fill_(byte)

    def close(self) -> None:
        self.raw = None
        if self.dev_buf is not None:
            self.dev_buf.close()
            self.dev_buf = None
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                pass
            self._mm = None

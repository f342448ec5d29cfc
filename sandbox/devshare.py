"""Device memory shared between the supervisor and an executor, without a host round trip.

Lent memory: the supervisor allocates device memory with CUDA's virtual memory management API (``cuMemCreate``
with a POSIX file-descriptor handle), zeroes it, and passes the descriptor to the executor over a Unix socket
(``SCM_RIGHTS``). The supervisor writes each call's inputs into it; it never holds anything else of the
supervisor's (zero-filled before the executor sees it, so no freed reference output leaks through physical
memory reuse), and it is released when its executor is gone.

Outputs left in place: an executor names the allocation of each output with a legacy CUDA IPC handle
(:func:`export_ipc`; measured to work from the bubblewrap sandbox on the H200), and the supervisor maps it
(:class:`IpcImports`), bounds-checks the range against the driver's size of the mapping and reads it after the
fence. Only candidates' executors export memory.

Only the CUDA driver API (``libcuda.so.1``) is used, through ctypes: no package beyond torch is needed.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct

import torch

CU_MEM_ALLOCATION_TYPE_PINNED = 1
CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1


class DevShareError(RuntimeError):
    """The driver refused a step of sharing device memory."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


IPC_HANDLE_BYTES = 64
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
MAX_IPC_OPEN = 256  # mappings one lease keeps open (least recently used closed first)

_LIB = None


def _lib():
    global _LIB
    if _LIB is None:
        lib = ctypes.CDLL("libcuda.so.1")
        u64, sz, vp = ctypes.c_ulonglong, ctypes.c_size_t, ctypes.c_void_p
        sigs = {
            "cuInit": [ctypes.c_uint],
            "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
            "cuDevicePrimaryCtxRetain": [ctypes.POINTER(vp), ctypes.c_int],
            "cuCtxSetCurrent": [vp],
            "cuCtxGetCurrent": [ctypes.POINTER(vp)],
            "cuMemGetAllocationGranularity": [ctypes.POINTER(sz), ctypes.POINTER(_AllocProp), ctypes.c_int],
            "cuMemCreate": [ctypes.POINTER(u64), sz, ctypes.POINTER(_AllocProp), u64],
            "cuMemExportToShareableHandle": [vp, u64, ctypes.c_int, u64],
            "cuMemImportFromShareableHandle": [ctypes.POINTER(u64), vp, ctypes.c_int],
            "cuMemAddressReserve": [ctypes.POINTER(u64), sz, sz, u64, u64],
            "cuMemMap": [u64, sz, sz, u64, u64],
            "cuMemSetAccess": [u64, sz, ctypes.POINTER(_AccessDesc), sz],
            "cuMemUnmap": [u64, sz],
            "cuMemAddressFree": [u64, sz],
            "cuMemRelease": [u64],
        }
        for name, args in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
        ipc = {  # legacy IPC of one allocation (outputs the executor leaves in its own memory), by versioned names
            "cuIpcGetMemHandle": [ctypes.POINTER(_IpcHandle), u64],
            "cuIpcOpenMemHandle_v2": [ctypes.POINTER(u64), _IpcHandle, ctypes.c_uint],
            "cuIpcCloseMemHandle": [u64],
            "cuMemGetAddressRange_v2": [ctypes.POINTER(u64), ctypes.POINTER(sz), u64],
            "cuPointerGetAttributes": [ctypes.c_uint, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(vp), u64],
        }
        for name, args in ipc.items():
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.argtypes, fn.restype = args, ctypes.c_int
        _LIB = lib
    return _LIB


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise DevShareError(f"{what} failed with CUresult {rc}")


def _use_device(index: int) -> int:
    """Make the device's primary context (the one torch uses) current on this thread; returns the CUdevice."""
    lib = _lib()
    _check(lib.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    _check(lib.cuDeviceGet(ctypes.byref(dev), index), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    _check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return dev.value


def _prop(dev: int) -> _AllocProp:
    p = _AllocProp()
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE
    p.location.id = dev
    return p


class _CudaArray:
    """The minimal ``__cuda_array_interface__`` torch needs to view raw device bytes."""

    def __init__(self, ptr: int, nbytes: int, owner):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 2, "strides": None}
        self._owner = owner  # keeps the mapping alive as long as a view of it


class SharedDeviceBuffer:
    """A device allocation mapped into this process; created (supervisor) or imported from a descriptor (worker)."""

    def __init__(self, device: torch.device, nbytes: int, handle: int, ptr: int, size: int, fd: int | None):
        self.device, self.nbytes, self._handle, self.ptr, self.size, self.fd = device, nbytes, handle, ptr, size, fd
        self.closed = False

    # -- creation ---------------------------------------------------------------------------------------
    @staticmethod
    def _granularity(dev: int) -> int:
        g = ctypes.c_size_t()
        p = _prop(dev)
        _check(_lib().cuMemGetAllocationGranularity(ctypes.byref(g), ctypes.byref(p),
                                                    CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "granularity")
        return max(int(g.value), 1)

    @classmethod
    def _map(cls, device, nbytes, handle, dev, fd):
        lib = _lib()
        ptr = ctypes.c_ulonglong()
        try:
            _check(lib.cuMemAddressReserve(ctypes.byref(ptr), nbytes, 0, 0, 0), "cuMemAddressReserve")
        except DevShareError:
            lib.cuMemRelease(handle)
            raise
        try:
            _check(lib.cuMemMap(ptr.value, nbytes, 0, handle, 0), "cuMemMap")
            acc = _AccessDesc()
            acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE
            acc.location.id = dev
            acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE
            _check(lib.cuMemSetAccess(ptr.value, nbytes, ctypes.byref(acc), 1), "cuMemSetAccess")
        except DevShareError:
            lib.cuMemUnmap(ptr.value, nbytes)
            lib.cuMemAddressFree(ptr.value, nbytes)
            lib.cuMemRelease(handle)
            raise
        return cls(device, nbytes, handle, ptr.value, nbytes, fd)

    @classmethod
    def create(cls, device: torch.device, nbytes: int) -> "SharedDeviceBuffer":
        """Allocate at least ``nbytes`` on ``device``, zero-filled, exportable as a file descriptor."""
        torch.cuda.init()
        dev = _use_device(device.index if device.index is not None else torch.cuda.current_device())
        g = cls._granularity(dev)
        size = max((nbytes + g - 1) // g * g, g)
        lib = _lib()
        handle = ctypes.c_ulonglong()
        p = _prop(dev)
        _check(lib.cuMemCreate(ctypes.byref(handle), size, ctypes.byref(p), 0), "cuMemCreate")
        fd = ctypes.c_int(-1)
        try:
            _check(lib.cuMemExportToShareableHandle(ctypes.byref(fd), handle.value,
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "export")
        except DevShareError:
            lib.cuMemRelease(handle.value)
            raise
        buf = cls._map(device, size, handle.value, dev, fd.value)
        buf.bytes_view().zero_()  # never lend memory that may still hold something of the supervisor's
        torch.cuda.synchronize(device)
        return buf

    @classmethod
    def import_fd(cls, device: torch.device, fd: int, nbytes: int) -> "SharedDeviceBuffer":
        """Map a buffer another process exported (``nbytes`` is its size as that process announced it)."""
        dev = _use_device(device.index if device.index is not None else torch.cuda.current_device())
        handle = ctypes.c_ulonglong()
        _check(_lib().cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd),
                                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), "import")
        return cls._map(device, nbytes, handle.value, dev, fd)

    # -- use ----------------------------------------------------------------------------------------------
    def bytes_view(self, offset: int = 0, nbytes: int | None = None) -> torch.Tensor:
        """A uint8 tensor over ``[offset, offset + nbytes)`` of the buffer (bounds-checked)."""
        if self.closed:
            raise DevShareError("the buffer is closed")
        nbytes = self.size - offset if nbytes is None else nbytes
        if offset < 0 or nbytes < 0 or offset + nbytes > self.size:
            raise ValueError(f"range [{offset}, {offset + nbytes}) outside a buffer of {self.size} bytes")
        full = torch.as_tensor(_CudaArray(self.ptr, self.size, self), device=self.device)
        return full[offset:offset + nbytes]

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        _use_device(self.device.index if self.device.index is not None else torch.cuda.current_device())
        lib = _lib()
        lib.cuMemUnmap(self.ptr, self.size)
        lib.cuMemAddressFree(self.ptr, self.size)
        lib.cuMemRelease(self._handle)
        if self.fd is not None and self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None


# ------------------------------------------------------------------------------- outputs left in place
#
# An output stays in the executor's own memory (no copy inside the timed block, as a workload would use it): the
# executor names its allocation with a legacy IPC handle, and the supervisor maps it and reads it after the
# fence. A handle is hostile data: it can only name memory some process exported with cuIpcGetMemHandle, and only
# candidates' executors ever export (trusted baseline processes deliver no outputs, the supervisor exports
# nothing); the range read is bounds-checked against the mapping's size as the driver reports it.

# CUpointer_attribute: a process-wide unique id of the allocation, its start and its size
_ATTR_BUFFER_ID, _ATTR_RANGE_START, _ATTR_RANGE_SIZE = 7, 11, 12
_EXPORTED: dict[int, bytes] = {}  # executor side: buffer id -> its IPC handle (the caching allocator reuses its blocks)
MAX_EXPORTED = 4096


def export_ipc(ptr: int) -> tuple[bytes, int, int]:
    """Executor side: (handle, offset of ``ptr`` in its allocation, allocation size) for a device pointer of the
    current context. Raises :class:`DevShareError` for memory that cannot be exported (VMM, lent memory).

    Every call of a candidate's executor names its outputs this way, so it is on the timed path (baselines deliver
    nothing). One attribute query finds the allocation; its handle is exported once per allocation, keyed by the
    driver's buffer id, which is never reused within a process: memory freed and allocated again at the same
    address is a new buffer, exported anew, so a kept handle never names a freed allocation."""
    bid, base, size = ctypes.c_ulonglong(), ctypes.c_ulonglong(), ctypes.c_size_t()
    attrs = (ctypes.c_int * 3)(_ATTR_BUFFER_ID, _ATTR_RANGE_START, _ATTR_RANGE_SIZE)
    data = (ctypes.c_void_p * 3)(ctypes.addressof(bid), ctypes.addressof(base), ctypes.addressof(size))
    _check(_lib().cuPointerGetAttributes(3, attrs, data, ptr), "cuPointerGetAttributes")  # CUDA 7.0 and later
    if not base.value:
        raise DevShareError("not memory of this process's device allocations")
    handle = _EXPORTED.get(bid.value)
    if handle is None:
        handle = _export_handle(base.value)
        if len(_EXPORTED) >= MAX_EXPORTED:
            _EXPORTED.pop(next(iter(_EXPORTED)))
        _EXPORTED[bid.value] = handle
    return handle, ptr - base.value, int(size.value)


def _export_handle(base: int) -> bytes:
    h = _IpcHandle()
    _check(_lib().cuIpcGetMemHandle(ctypes.byref(h), base), "cuIpcGetMemHandle")
    return bytes(ctypes.string_at(ctypes.addressof(h), IPC_HANDLE_BYTES))


class IpcImports:
    """Supervisor side: the allocations one executor named, mapped once each and closed with the lease."""

    def __init__(self, device: torch.device):
        self.device = device
        self._index = device.index if device.index is not None else torch.cuda.current_device()
        self._open: dict[bytes, tuple[int, int]] = {}

    def view(self, handle: bytes, offset: int, nbytes: int) -> torch.Tensor:
        """A uint8 view of ``[offset, offset + nbytes)`` of the allocation ``handle`` names."""
        if not isinstance(handle, bytes) or len(handle) != IPC_HANDLE_BYTES:
            raise DevShareError("not an IPC handle")
        entry = self._open.pop(handle, None)
        if entry is None:
            entry = self._map(handle)
        self._open[handle] = entry  # most recently used last
        while len(self._open) > MAX_IPC_OPEN:
            old = next(iter(self._open))
            _lib().cuIpcCloseMemHandle(self._open.pop(old)[0])
        ptr, size = entry
        if offset < 0 or nbytes < 0 or offset + nbytes > size:
            raise DevShareError(f"range [{offset}, {offset + nbytes}) outside an allocation of {size} bytes")
        full = torch.as_tensor(_CudaArray(ptr, size, self), device=self.device)
        return full[offset:offset + nbytes]

    def _map(self, handle: bytes) -> tuple[int, int]:
        lib = _lib()
        _use_device(self._index)
        h = _IpcHandle()
        ctypes.memmove(ctypes.addressof(h), handle, IPC_HANDLE_BYTES)
        ptr = ctypes.c_ulonglong()
        _check(lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle")
        base, size = ctypes.c_ulonglong(), ctypes.c_size_t()
        rc = lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr.value)
        if rc != 0 or base.value != ptr.value:
            lib.cuIpcCloseMemHandle(ptr.value)
            raise DevShareError(f"the mapped allocation has no range (CUresult {rc})")
        return ptr.value, int(size.value)

    def close(self) -> None:
        if self._open:
            torch.cuda.synchronize(self.device)  # no copy of the supervisor's may still read a mapping
            lib = _lib()
            for ptr, _ in self._open.values():
                lib.cuIpcCloseMemHandle(ptr)
            self._open.clear()


# -------------------------------------------------------------------------------------------- fd passing

_TAG = struct.Struct(">cQ")  # kind ("P" probe, "B" buffer) and the buffer's size in bytes


def send_fd(sock: socket.socket, fd: int, kind: bytes, nbytes: int) -> None:
    socket.send_fds(sock, [_TAG.pack(kind, nbytes)], [fd])


def recv_fd(sock: socket.socket, kind: bytes) -> tuple[int, int]:
    """The next descriptor on the socket and the size it was announced with; it must be of ``kind``."""
    msg, fds, _, _ = socket.recv_fds(sock, _TAG.size, 4)
    for extra in fds[1:]:
        os.close(extra)
    ok = len(msg) == _TAG.size and bool(fds)
    got_kind, nbytes = _TAG.unpack(msg) if len(msg) == _TAG.size else (None, 0)
    if not ok or got_kind != kind:
        for f in fds[:1]:
            os.close(f)
        raise DevShareError(f"expected a {kind!r} descriptor, got {msg!r} with {len(fds)} descriptors")
    return fds[0], nbytes

"""The driver's own list of the processes with a context on a GPU (NVML), for the timing phase's facts.

A timed block is meant to have the GPU to itself: the candidate and the baselines alternate, and everything
else kbenv runs is kept off the GPU while they do (spares paused, dying executors reaped, the next baseline set
not started). This lists what NVML says actually holds a context while timing runs, each process named by its
role (``supervisor``, ``candidate``, ``eager``/``compile``, ``spare``) or ``other``: a process of no role is
one kbenv did not expect there (or a pid NVML gives from another pid namespace). It decides nothing; it is
there so that a timing figure that moves can be traced to what shared the GPU. Off by default
(``Supervisor.gpu_process_facts``; ``benchmarks/trusted_bench.py`` turns it on).

Only ``libnvidia-ml.so.1``, through ctypes: no package beyond torch is needed.
"""

from __future__ import annotations

import ctypes
import os

import torch


class _ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_t (v2/v3 layout)
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


def pci_bus_id(index: int) -> str | None:
    """The device's PCI bus id as NVML spells it; None where torch does not report it."""
    try:
        p = torch.cuda.get_device_properties(index)
        return f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
    except Exception:  # noqa: BLE001 - older torch without the PCI fields, or no CUDA
        return None


_LIB: list = []


def _handle(index: int):
    if not _LIB:
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            _LIB.append(lib if lib.nvmlInit_v2() == 0 else None)
        except OSError:
            _LIB.append(None)
    lib = _LIB[0]
    if lib is None:
        return None, None
    handle = ctypes.c_void_p()
    bus = pci_bus_id(index)
    rc = (lib.nvmlDeviceGetHandleByPciBusId_v2(bus.encode(), ctypes.byref(handle)) if bus else
          lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(handle)))
    return (lib, handle) if rc == 0 else (None, None)


def compute_processes(index: int) -> list[tuple[int, int]] | None:
    """(pid, device bytes) of every process with a compute context on the device; None without NVML."""
    lib, handle = _handle(index)
    if lib is None:
        return None
    fn = getattr(lib, "nvmlDeviceGetComputeRunningProcesses_v3", None)
    if fn is None:
        return None
    # room for 64 entries of a struct up to 64 bytes: a driver whose entry is larger than the documented v3
    # layout (24 bytes) gives garbage here, never a write past the buffer
    n = 64
    raw = (ctypes.c_ubyte * (64 * n))()
    count = ctypes.c_uint(n)
    if fn(handle, ctypes.byref(count), raw) != 0:
        return None
    infos = ctypes.cast(raw, ctypes.POINTER(_ProcessInfo))
    return [(int(infos[i].pid), int(infos[i].usedGpuMemory)) for i in range(min(count.value, n))]


def by_role(index: int, roles: dict[str, list[int]]) -> dict | None:
    """The processes on the device now, by role (``roles``: role -> pids; this process is the supervisor):
    {role: [MiB each]}, processes of no role under ``other``."""
    try:
        procs = compute_processes(index)
    except (OSError, AttributeError, ValueError, TypeError):  # a driver library without these symbols
        return None
    if procs is None:
        return None
    role_of = {os.getpid(): "supervisor"}
    for role, pids in roles.items():
        role_of.update({p: role for p in pids})
    out: dict[str, list[int]] = {}
    for pid, used in procs:
        out.setdefault(role_of.get(pid, "other"), []).append(used >> 20)
    return out

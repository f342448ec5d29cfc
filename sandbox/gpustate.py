"""What the driver says of a GPU while timing runs (NVML): the processes with a context on it, its clocks, its
temperature and power, and the reasons its clocks are held down. For the timing phase's facts.

A timed block is meant to have the GPU to itself and to see the same machine as the blocks beside it: the
candidate and the baselines alternate, and everything else kbenv runs is kept off the GPU while they do (spares
paused, dying executors reaped, the next baseline set not started). This records what NVML says actually held a
context as timing began and ended, each process named by its role (``supervisor``, ``candidate``,
``eager``/``compile``, ``spare``) or ``other`` (a process kbenv did not expect there, or a pid NVML gives from
another pid namespace), and the clocks and their throttle reasons: a bandwidth-bound baseline slows under a
power or thermal cap where a kernel that is not bandwidth-bound does not, which moves the ratio. It decides
nothing; it is there so that a timing figure that moves can be traced. Off by default
(``Supervisor.gpu_state_facts``; ``benchmarks/trusted_bench.py`` turns it on).

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


DYING_SLACK = 256 << 20  # beside what NVML reports killed processes holding: an allocation in flight at the kill


def held_after_kill(index: int, pids: list[int]) -> tuple[int | None, set[int]]:
    """What processes just sent SIGKILL (``pids``) may still hold on the device while their contexts die: the bytes
    NVML reports them holding now, plus ``DYING_SLACK`` (nothing more is allocated once the kill lands, so the
    figure only falls), and the pids it listed. ``(None, set())`` where NVML cannot say or lists none of them: the
    caller's planned figure then stands."""
    if not pids:
        return None, set()
    try:
        procs = compute_processes(index)
    except (OSError, AttributeError, ValueError, TypeError):  # a driver library without these symbols
        return None, set()
    want = set(pids)
    mine = {pid: used for pid, used in (procs or []) if pid in want}
    return (sum(mine.values()) + DYING_SLACK, set(mine)) if mine else (None, set())


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


def _reading(lib, handle, fn: str, arg: int) -> int | None:
    """One unsigned NVML reading of the device (``fn(handle, arg, &value)``); None where the driver refuses it or
    lacks the symbol."""
    v = ctypes.c_uint()
    try:
        return int(v.value) if getattr(lib, fn)(handle, ctypes.c_int(arg), ctypes.byref(v)) == 0 else None
    except AttributeError:
        return None


def sm_clock(index: int) -> int | None:
    """The SM clock now (MHz); None without NVML or where the driver refuses it."""
    lib, handle = _handle(index)
    return None if lib is None else _reading(lib, handle, "nvmlDeviceGetClockInfo", 0)


REASONS = {0x1: "idle", 0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost",
           0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clock"}


def snapshot(index: int, roles: dict[str, list[int]]) -> dict | None:
    """:func:`by_role`, with the SM and memory clocks (MHz), temperature (C), power (W) and the active clock
    event reasons (``REASONS``); None without NVML. A reading the driver refuses is left out."""
    procs = by_role(index, roles)
    lib, handle = _handle(index) if procs is not None else (None, None)
    if lib is None:
        return None
    out: dict = {"processes": procs}
    for key, fn, arg in (("sm_mhz", "nvmlDeviceGetClockInfo", 0), ("mem_mhz", "nvmlDeviceGetClockInfo", 2),
                         ("temp_c", "nvmlDeviceGetTemperature", 0)):
        value = _reading(lib, handle, fn, arg)
        if value is not None:
            out[key] = value
    v = ctypes.c_uint()
    try:
        if lib.nvmlDeviceGetPowerUsage(handle, ctypes.byref(v)) == 0:
            out["power_w"] = round(v.value / 1000, 1)
        mask = ctypes.c_ulonglong()
        if lib.nvmlDeviceGetCurrentClocksThrottleReasons(handle, ctypes.byref(mask)) == 0:
            out["clock_reasons"] = [name for bit, name in REASONS.items() if mask.value & bit]
    except AttributeError:
        pass
    return out

"""Fences: the supervisor's own proof that an executor's work has ended, from outside its process.

An executor's ``done`` is a hint: its process may reply before its kernels end, or leave a thread or a kernel
running after the reply. A fence returns only when everything the process submitted has completed, and keeps
it from doing more until released; the supervisor stops its clock after the fence returns and reads the lent
memory while the process is held.

- cpu: SIGSTOP every process of the executor, waiting until each one is stopped (work after the reply can only
  have happened before the stop, inside the timed block).
- cuda: the driver's process lock (``cuCheckpointProcessLock``, CUDA 12.8+ drivers): it blocks the process's
  further CUDA calls and waits until its submitted work has completed; then SIGSTOP. Released in reverse order.
  Without that API (an older driver), :class:`IdleProbeFence` is used: SIGSTOP, then the supervisor times a tiny
  kernel of its own until the GPU answers like an idle one, which it does not while another context has work
  queued (contexts time-slice); the kind used is named in the result's facts.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import time
import weakref

from kbenv.sandbox.executors import CandidateFault
from kbenv.sandbox.process import ExecutorProcess, StopIncomplete, proc_state


class FenceTimeout(CandidateFault):
    """The executor's work did not end within the fence's deadline (the candidate's ``timeout``)."""

    def __init__(self, reason: str):
        super().__init__("timeout", reason)


def _alive(pid: int) -> bool:
    return proc_state(pid) not in "ZX"


class StopFence:
    """cpu: the process tree stopped (every thread of it)."""

    kind = "sigstop"

    def __init__(self, device=None):
        self._held: dict[int, list[int]] = {}

    def prepare(self, p: ExecutorProcess) -> list[int]:
        return []

    def complete(self, p: ExecutorProcess, pids: list[int], timeout_s: float = 10.0) -> None:
        self.hold(p, timeout_s)

    def hold(self, p: ExecutorProcess, timeout_s: float = 10.0) -> None:
        """Every process of the executor stopped (``ExecutorProcess.pause``: scanned until a scan finds none it
        did not stop); processes that outrun the stop until the deadline are the candidate's ``timeout``."""
        if id(p) in self._held:
            return
        try:
            self._held[id(p)] = p.pause(timeout_s)
        except StopIncomplete as e:
            self._held[id(p)] = e.held  # released (or killed with the executor) like any held process
            raise FenceTimeout(str(e)) from None

    def release(self, p: ExecutorProcess) -> None:
        ExecutorProcess.resume(self._held.pop(id(p), []))

    def holds(self, p: ExecutorProcess) -> bool:
        """Whether ``p`` is held now (by :meth:`hold`, not yet released)."""
        return id(p) in self._held


OS_CALL_FAILED = 304  # CUDA_ERROR_OPERATING_SYSTEM


class _LockArgs(ctypes.Structure):
    _fields_ = [("timeoutMs", ctypes.c_uint), ("reserved0", ctypes.c_uint), ("reserved1", ctypes.c_uint64 * 7)]


class _UnlockArgs(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_uint64 * 8)]


def _driver():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    if not hasattr(lib, "cuCheckpointProcessLock"):
        return None
    lib.cuCheckpointProcessLock.argtypes = [ctypes.c_int, ctypes.POINTER(_LockArgs)]
    lib.cuCheckpointProcessUnlock.argtypes = [ctypes.c_int, ctypes.POINTER(_UnlockArgs)]
    return lib


class Watchdog:
    """One long-lived thread that kills an executor whose fence call is still pending at its deadline.

    ``with wd.armed(proc, seconds) as fired: <blocking call>``; ``fired()`` afterwards says whether the kill was
    sent. Arming and disarming take a lock and a notify: nothing is started or joined on the caller's path."""

    def __init__(self):
        self._cv = threading.Condition()
        self._target = None  # (proc, deadline, generation) while armed
        self._generation = 0
        self._fired: set[int] = set()
        threading.Thread(target=self._run, name="kbenv-fence-watchdog", daemon=True).start()

    def _run(self) -> None:
        with self._cv:
            while True:
                if self._target is None:
                    self._cv.wait()
                    continue
                proc, deadline, gen = self._target
                left = deadline - time.monotonic()
                if left > 0:
                    self._cv.wait(left)
                    continue
                self._fired.add(gen)
                self._target = None
                try:
                    proc.signal_kill()
                except Exception:  # noqa: BLE001 - a process already gone: the pending call returns by itself
                    pass

    @contextlib.contextmanager
    def armed(self, proc, seconds: float):
        with self._cv:
            self._generation += 1
            gen = self._generation
            self._target = (proc, time.monotonic() + seconds, gen)
            self._cv.notify()
        try:
            yield lambda: gen in self._fired
        finally:
            with self._cv:
                if self._target is not None and self._target[2] == gen:
                    self._target = None
                    self._cv.notify()
        # (fired() stays answerable after the block; the set holds one int per timeout, which are rare)


class ProcessLockFence(StopFence):
    """cuda: the driver's process lock (waits for the process's submitted GPU work), then SIGSTOP."""

    kind = "cuda_process_lock"

    def __init__(self, device=None, lib=None):
        super().__init__(device)
        self.lib = lib or _driver()
        self._locked: dict[int, list] = {}
        # per executor (weakly: an id() is reused once its object is gone, and a new executor must not inherit
        # an old one's pids)
        self._known: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._watchdog = Watchdog()

    def _cuda_pids(self, p: ExecutorProcess) -> list[int]:
        """Host pids of the executor's processes that loaded the CUDA driver, scanned once per process tree
        member (reading a torch process's maps costs milliseconds: never inside a timed block)."""
        known = self._known.setdefault(p, {})
        for pid in p._tree():
            if pid not in known:
                known[pid] = self._has_cuda(pid)
        return [pid for pid, yes in known.items() if yes]

    def prepare(self, p: ExecutorProcess) -> list[int]:
        """Before a timed block: the processes to lock after it (so the block's end costs only the locks)."""
        return self._cuda_pids(p)

    @staticmethod
    def _has_cuda(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/maps") as f:
                return "libcuda.so" in f.read()
        except OSError:
            return False

    def complete(self, p: ExecutorProcess, pids: list[int], timeout_s: float = 10.0) -> None:
        """The end of a timed block: lock the processes found by :meth:`prepare` (returns once their GPU work
        is done); :meth:`hold` afterwards locks any process that appeared since, and stops the tree."""
        self._lock_all(p, pids, timeout_s)

    def hold(self, p: ExecutorProcess, timeout_s: float = 10.0) -> None:
        self._lock_all(p, self._cuda_pids(p), timeout_s)
        super().hold(p, timeout_s)
        # a process the stop's later scans found (it appeared after the lock) may have GPU work queued, which a
        # stop does not end: lock it too (a lock on a stopped process can hang until the watchdog's kill, which
        # only a candidate whose processes escaped the first scan can meet)
        known = self._known.setdefault(p, {})
        late = [q for q in self._held.get(id(p), []) if q not in known]
        for q in late:
            known[q] = self._has_cuda(q)
        self._lock_all(p, [q for q in late if known[q]], timeout_s)

    def _lock_all(self, p: ExecutorProcess, pids: list[int], timeout_s: float) -> None:
        """Lock every given CUDA process of the executor not yet locked, each under a deadline enforced from
        here: the driver does not honour its own timeout against a process that stopped itself (measured on the
        H200), so a lock still pending at the deadline is ended by SIGKILLing the executor (which releases it)."""
        locked = self._locked.setdefault(id(p), [])
        for pid in pids:
            if pid in locked:
                continue
            rc = self._lock(p, pid, timeout_s)
            for _ in range(3):  # CUresult 304 (an OS call failed) was seen now and then on the H200: ask again
                if rc != OS_CALL_FAILED or not _alive(pid):
                    break
                time.sleep(0.005)
                rc = self._lock(p, pid, timeout_s)
            if rc == 3 or not _alive(pid):  # no context (no work), or the process has exited: nothing to wait for
                continue
            if rc != 0:
                raise FenceTimeout(f"the driver could not fence the executor's process (CUresult {rc})")
            locked.append(pid)

    def _lock(self, p: ExecutorProcess, pid: int, timeout_s: float) -> int:
        """The driver's lock, called on this thread (a thread started per lock cost the timed block its start and
        join); the watchdog kills the executor if the call is still pending at the deadline (SIGKILL releases a
        pending lock: measured 36 ms on the H200), and the lock is then the candidate's timeout."""
        args = _LockArgs(timeoutMs=int(timeout_s * 1000))
        with self._watchdog.armed(p, timeout_s + 1.0) as fired:
            rc = self.lib.cuCheckpointProcessLock(pid, ctypes.byref(args))
        if fired():
            raise FenceTimeout(f"the executor's GPU work did not end within {timeout_s:.0f} s of its reply")
        return rc

    def release(self, p: ExecutorProcess) -> None:
        super().release(p)
        for pid in self._locked.pop(id(p), []):
            self.lib.cuCheckpointProcessUnlock(pid, ctypes.byref(_UnlockArgs()))


class IdleProbeFence(StopFence):
    """cuda without the lock API: SIGSTOP, then wait until the GPU runs a tiny kernel of the supervisor's as
    fast as an idle GPU does (measured at start), which it does not while another context still has work."""

    kind = "idle_probe"

    def __init__(self, device=None):
        super().__init__(device)
        import torch
        self.device = device
        self._x = torch.zeros(1024, device=device)
        self.idle_us = min(self._probe() for _ in range(20))

    def _probe(self) -> float:
        import torch
        t = time.perf_counter()
        self._x.add_(1)
        torch.cuda.synchronize(self.device)
        return (time.perf_counter() - t) * 1e6

    def hold(self, p: ExecutorProcess, timeout_s: float = 10.0) -> None:
        super().hold(p, timeout_s)
        deadline = time.monotonic() + timeout_s
        calm = 0
        while calm < 3:
            calm = calm + 1 if self._probe() < 4 * self.idle_us + 20 else 0
            if time.monotonic() > deadline:
                raise FenceTimeout("the GPU stayed busy after the executor was stopped")


def make_fence(device) -> StopFence:
    if getattr(device, "type", "cpu") != "cuda":
        return StopFence(device)
    if os.environ.get("KBENV_FENCE") != "idle_probe" and _driver() is not None:
        return ProcessLockFence(device)
    return IdleProbeFence(device)

"""Lanes: several supervisors sharing one GPU, with every timing phase alone on it (issue 13).

A lane is one :class:`~kbenv.sandbox.supervisor.Supervisor` (one Ray actor), and ``lanes`` of them share a GPU.
Their candidates' compile, correctness and decoy work may overlap; a timing phase never shares the GPU with
anything, and any verdict that sharing could have caused is judged again with the lane alone on the GPU before it
counts. What they agree on lives in three lock files per GPU (``flock``; a directory under the supervisors'
/tmp, which every sandbox hides), one file descriptor per lane process for each:

- ``gpu``: **shared** while a lane uses the GPU for anything but timing: its evaluation, and each of its processes
  still being reaped (a dying CUDA context may still run kernels) until it is gone; **exclusive** while a lane
  times its candidate against the baselines, or judges alone.
- ``candidates``: **shared** while a lane's evaluation has (or may have) a candidate's process alive, its dying
  processes included; **exclusive** for a lane judging alone, so that no other candidate holds device memory (no
  bound holds a process's device memory from outside it) or GPU time then.
- ``turnstile``: **exclusive** while a lane waits to judge alone; a lane starting an evaluation passes through it
  (shared, then released at once), so a lane waiting to judge alone is not starved by the others' next ones.
- ``gpu_turn``: **exclusive** while a lane waits for ``gpu`` exclusive to time; a lane taking ``gpu`` shared for
  an evaluation passes through it first. ``flock`` grants a lock to whoever asks when it is free, not to who waited
  longest: without this turn, a lane whose evaluations follow each other (each one's shared hold taken before its
  last one's reapers let go) kept another lane's timing phase waiting for 100 s on the H200.

Order, so that no two lanes wait on each other: turnstile, candidates, gpu_turn, gpu. An evaluation starts by
passing the turnstile, then takes ``candidates`` shared, passes ``gpu_turn`` and takes ``gpu`` shared; its timing
phase gives ``gpu`` up, takes ``gpu_turn`` and waits for ``gpu`` exclusive (with its candidate held by the fence,
its started spares paused and every process it disposed of reaped, so the lane is quiet while it waits), lets
``gpu_turn`` go once it has ``gpu``, and takes ``gpu`` shared again when the phase ends; the evaluation gives both
up when it ends. A lane judging alone takes turnstile, candidates and gpu exclusive, in that order, after giving up
what it held.

Within one lane process the holds are counted (the evaluation and each reaper thread), and one ``flock`` per file
stands for all of them. While the lane holds a file exclusive, its own shared holds are already covered and are
counted only: a reaper of the lane judging alone never waits on its own lane.

A lane's own processes run nothing on the GPU while it holds nothing: spares start only while it holds ``gpu``
(``ExecutorPool``) and are ready before it lets go, and a lane opens no baseline set ahead of its next evaluation.

Giving way (``kbenv.sandbox.preempt``): a lane whose evaluation holds ``gpu`` shared sees another lane waiting to time
(``gpu_turn`` held exclusive: :meth:`Lanes.wanted`, through a second descriptor), makes itself quiet, and lets its
shared hold go for that timing phase (:meth:`Lanes.giving_way`), taking it again through ``gpu_turn``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

FILES = ("turnstile", "candidates", "gpu_turn", "gpu")
ALONE = ("turnstile", "candidates", "gpu")  # what judging alone takes exclusive, in this order


def lock_dir(key: str) -> Path:
    """The lock files' directory for the GPU ``key`` (its UUID): under the supervisors' own /tmp, which every
    sandbox hides (``process.HIDDEN``), so no candidate can open, hold or delete a lock."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", key)[:120] or "gpu"
    d = Path(tempfile.gettempdir()) / f"kbenv-lanes-{safe}"
    d.mkdir(mode=0o700, exist_ok=True)
    st = d.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o077:  # made by someone else: its locks would be theirs to hold
        raise RuntimeError(f"{d} is not this user's own directory (owner uid {st.st_uid}, mode {st.st_mode & 0o777:o})")
    return d


class _File:
    """One lock file of this lane process: a count of shared holds and whether it is held exclusive."""

    def __init__(self, path: Path):
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self.shared = 0
        self.exclusive = False

    def _flock(self, op: int) -> None:
        fcntl.flock(self.fd, op)

    def close(self) -> None:
        os.close(self.fd)


class Lanes:
    """This supervisor's side of a GPU shared by ``lanes`` supervisors (see the module's docstring)."""

    def __init__(self, key: str, lanes: int, directory: Path | None = None):
        if lanes < 2:
            raise ValueError("lanes share a GPU between at least two supervisors")
        self.lanes = int(lanes)
        self.key = key
        d = directory or lock_dir(key)
        self._files = {name: _File(d / f"{name}.lock") for name in FILES}
        self._mu = threading.Lock()  # counts and flocks of this process: one change at a time
        self.alone_runs = 0  # evaluations judged again alone (a fact)
        # a second descriptor of gpu_turn, only to see whether a lane holds it exclusive (waits to time): flock
        # treats it as another holder, so a probe through it never converts this lane's own lock
        self._probe = os.open(d / "gpu_turn.lock", os.O_RDWR | os.O_CREAT, 0o600)
        self._timing = False  # this lane gave its shared hold up to time (or judges alone): it never gives way then
        self.passed_on = 0  # timing phases that passed the GPU straight to a lane waiting to time (facts)
        self.passed_on_s = 0.0  # and how long this lane then waited to take it back shared

    # ------------------------------------------------------------------------------------- shared holds
    def _acquire_shared(self, name: str) -> None:
        f = self._files[name]
        with self._mu:
            # The first hold takes the flock under the mutex, so no other thread of this lane can see a count without
            # the lock behind it, or release the lock while it is being taken. It may wait (another lane times or
            # judges alone); nothing of this lane holds the file then, so nothing of it needs the mutex to go on.
            if not (f.exclusive or f.shared):
                f._flock(fcntl.LOCK_SH)
            f.shared += 1

    def _release_shared(self, name: str) -> None:
        f = self._files[name]
        with self._mu:
            if f.shared <= 0:
                raise RuntimeError(f"lanes: {name} released more often than held")
            f.shared -= 1
            if not f.shared and not f.exclusive:
                f._flock(fcntl.LOCK_UN)

    def hold(self, gpu: bool = True, candidates: bool = False) -> "Hold":
        """A shared hold for a process of this lane being reaped (``gpu``; ``candidates`` when it ran candidate
        code), taken now by a thread that already holds them (never waits) and released by :meth:`Hold.release`
        once the process is gone."""
        names = [n for n, want in (("candidates", candidates), ("gpu", gpu)) if want]
        for n in names:
            self._acquire_shared(n)
        return Hold(self, names)

    def _pass(self, name: str) -> None:
        """Through a turn: wait while another lane holds it exclusive (never while this lane does)."""
        t = self._files[name]
        if not t.exclusive:
            t._flock(fcntl.LOCK_SH)
            t._flock(fcntl.LOCK_UN)

    @contextlib.contextmanager
    def evaluation(self):
        """An evaluation sharing the GPU: through the turnstile, ``candidates`` shared, through ``gpu_turn``, ``gpu``
        shared."""
        self._pass("turnstile")
        self._acquire_shared("candidates")
        try:
            # even where this lane's reapers still hold gpu shared: an evaluation that rode on them would keep a
            # waiting timing phase out as long as evaluations follow each other
            self._pass("gpu_turn")
            self._acquire_shared("gpu")
            try:
                yield
            finally:
                self._release_shared("gpu")
        finally:
            self._release_shared("candidates")

    # ------------------------------------------------------------------------------------- giving way
    def wanted(self) -> bool:
        """Whether a lane waits for the GPU alone to time (holds ``gpu_turn`` exclusive): seen through the probe
        descriptor, without waiting. False while this lane itself times or judges alone."""
        return not self._timing and self._turn_taken()

    def in_evaluation(self) -> bool:
        """Whether this lane holds the GPU shared for an evaluation (not timing, not alone)."""
        g = self._files["gpu"]
        return not self._timing and not g.exclusive and g.shared >= 1

    def may_give_way(self) -> bool:
        """Whether this lane holds the GPU shared for an evaluation and for nothing else (no process of it still
        being reaped, not timing, not alone): only then can it let the GPU go for another lane's timing phase."""
        g = self._files["gpu"]
        with self._mu:
            return not self._timing and not g.exclusive and g.shared == 1

    @contextlib.contextmanager
    def giving_way(self):
        """The evaluation's shared hold of ``gpu`` let go, so that a lane waiting to time gets the GPU alone, then
        taken again (through ``gpu_turn``, behind every lane that waits to time) before the block's end. Called
        with the lane quiet (``kbenv.sandbox.preempt``): nothing of it runs on the GPU until then."""
        g = self._files["gpu"]
        with self._mu:
            if self._timing or g.exclusive or g.shared != 1:
                raise RuntimeError(f"lanes: giving way needs the evaluation's one shared hold of the GPU, but it holds "
                                   f"{'exclusive' if g.exclusive else g.shared}")
            g.shared = 0
            g._flock(fcntl.LOCK_UN)
        try:
            yield
        finally:
            self._pass("gpu_turn")
            self._acquire_shared("gpu")

    # -------------------------------------------------------------------------------------- exclusive
    @contextlib.contextmanager
    def timing(self, settle: Callable[[], bool] | None = None):
        """The GPU alone for a timing phase: the evaluation's shared hold of ``gpu`` given up (it must be the lane's
        only one: everything the lane disposed of is reaped), ``gpu`` exclusive until the block ends, then shared
        again. Inside :meth:`alone` the lane has the GPU already.

        Passing on: ``settle`` given, the lane is as quiet at the block's end as it was while it waited (its
        candidate held, its spares paused, nothing dying), and ``settle()`` ends the lane's own queued work (the
        supervisor's context) and says whether the lane is quiet. Then, at the end of a block that raised nothing,
        where another lane waits to time, the GPU goes straight to it: let go wholly rather than kept shared, and
        taken shared again behind it (:meth:`giving_way`'s way back). Kept shared, the next timing phase waited for
        this lane to give way (its threads parked, its processes made quiet: 1.3-1.5 s on an H100, stop 47) or for
        its evaluation's end, its dying executor's reaping included."""
        g = self._files["gpu"]
        if g.exclusive:
            yield
            return
        with self._mu:
            if g.shared != 1:
                raise RuntimeError(f"lanes: the timing phase needs the lane quiet, but it holds {g.shared} shared "
                                   "holds of the GPU (a process still being reaped)")
            g.shared = 0
            g._flock(fcntl.LOCK_UN)
            self._timing = True
        try:
            turn = self._files["gpu_turn"]
            turn._flock(fcntl.LOCK_EX)  # the next to time: new shared holds of other lanes wait behind this turn
            try:
                g._flock(fcntl.LOCK_EX)
                g.exclusive = True
            finally:
                turn._flock(fcntl.LOCK_UN)
            yield
        except BaseException:  # a phase that failed passes nothing on: its lane may not be quiet
            self._end_timing(False)
            raise
        passing = settle is not None and self._turn_taken()
        try:
            passing = passing and bool(settle())
        finally:
            self._end_timing(passing)

    def _end_timing(self, passing: bool) -> None:
        """The timing block's end: ``gpu`` shared again (a conversion: other lanes waiting for it exclusive wait
        on), or, passing on, let go and taken again shared behind the lane that waits to time."""
        g = self._files["gpu"]
        try:
            with self._mu:
                g.exclusive = False
                if not passing:
                    g._flock(fcntl.LOCK_SH)
                    g.shared = 1
                    return
                g._flock(fcntl.LOCK_UN)
            t0 = time.monotonic()
            self.passed_on += 1
            self._pass("gpu_turn")
            self._acquire_shared("gpu")
            self.passed_on_s += time.monotonic() - t0
        finally:
            self._timing = False

    def _turn_taken(self) -> bool:
        """Whether another lane holds ``gpu_turn`` exclusive (waits to time), seen through the probe descriptor
        (this lane's own descriptor of it is not held while it times)."""
        try:
            fcntl.flock(self._probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self._probe, fcntl.LOCK_UN)
        return False

    @contextlib.contextmanager
    def alone(self):
        """The lane alone on the GPU: no other lane's candidate alive, nothing else of theirs on the GPU. Called
        with nothing of this lane held (its processes reaped)."""
        held = [n for n, f in self._files.items() if f.shared or f.exclusive]
        if held:
            raise RuntimeError(f"lanes: judging alone needs the lane quiet, but it holds {held}")
        taken = []
        self._timing = True
        try:
            for name in ALONE:  # the module's order: turnstile, candidates, gpu
                f = self._files[name]
                f._flock(fcntl.LOCK_EX)
                f.exclusive = True
                taken.append(f)
            self.alone_runs += 1
            yield
        finally:
            for f in reversed(taken):
                with self._mu:
                    f.exclusive = False
                    if not f.shared:
                        f._flock(fcntl.LOCK_UN)
                    else:  # holds of this lane's reapers outlive the run: shared now
                        f._flock(fcntl.LOCK_SH)
            self._timing = False

    def facts(self) -> dict:
        """Counts and seconds since the lane started (the supervisor reports one evaluation's difference)."""
        return {"passed_on": self.passed_on, "passed_on_s": round(self.passed_on_s, 3)}

    def held(self) -> dict:
        """What this lane holds now (for tests and facts)."""
        with self._mu:
            return {n: ("exclusive" if f.exclusive else f.shared) for n, f in self._files.items()}

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        os.close(self._probe)


class Hold:
    """Shared holds of a process of this lane until it is gone (:meth:`Lanes.hold`)."""

    def __init__(self, lanes: Lanes, names: list[str]):
        self._lanes, self._names, self._done = lanes, names, False

    def release(self) -> None:
        if self._done:
            return
        self._done = True
        for n in reversed(self._names):
            self._lanes._release_shared(n)


# Verdicts that sharing the GPU could have caused: judged again alone before they count. ``nondeterministic``
# too: a kernel whose result depends on the order its blocks run in (float atomics) meets another schedule when
# another context shares the SMs.
SHARING_CAUSABLE = frozenset({"oom", "timeout", "crash", "nondeterministic"})


def sharing_could_cause(res) -> bool:
    """Whether a result could be another lane's doing: out of memory anywhere (a candidate's own allocation, the
    trusted side, a spare's start), a deadline missed (the GPU and CPUs shared), a process killed (the host's
    memory shared), outputs that differ between two runs of the same inputs (another schedule of the SMs); a
    decoy verdict whose no-op run failed that way. Wrong values, wrong shapes, compile errors
    and passes stand: contexts share no memory or faults, the timing phase runs alone, and lent memory reaches
    an executor only as a descriptor its own supervisor passes it."""
    if res.verdict == "pass":
        return False
    if res.category in SHARING_CAUSABLE:
        return True
    text = f"{res.reason or ''} {res.error or ''}".lower()
    if "out of memory" in text or "cuda_error_out_of_memory" in text:
        return True
    decoy = (res.facts or {}).get("decoy") or {}
    failure = decoy.get("noop_failure")
    return res.category == "decoy" and failure in SHARING_CAUSABLE


__all__ = ["Lanes", "Hold", "lock_dir", "sharing_could_cause", "SHARING_CAUSABLE"]

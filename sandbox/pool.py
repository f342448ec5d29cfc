"""The pool of clean executors of one supervisor: started ahead of need, each used for one candidate, then killed
and reaped off the evaluation's path (``ExecutorPool``)."""

from __future__ import annotations

import select
import shutil
import threading
import time

import torch

from kbenv.sandbox import process
from kbenv.sandbox.baselines import out_of_memory
from kbenv.sandbox.process import SpawnError
from kbenv.sandbox.references import HarnessError




class ExecutorPool:
    """Clean executors started ahead of need; each is used for one candidate and then killed (reaped in the
    background). On cuda, taking an executor waits for the killed ones to be gone (a dying CUDA context still
    holds its memory) unless the current memory plan has room for them beside everything it holds
    (:meth:`set_room`); the timing phase always waits (:meth:`join`)."""

    def __init__(self, sup, spares: int):
        self.sup = sup
        self.max_n = spares  # as configured
        self.n = spares  # kept now: fewer while a problem's memory plan has room for fewer (set_target)
        self.spares: list[process.ExecutorProcess] = []
        self._reapers: list[tuple] = []  # (thread, lease, device bytes the dying executor may still hold)
        self.room_bytes = 0  # what the current plan leaves free beside everything it holds (set_room)
        self.executor_bytes = 0  # what one executor of the current plan may hold (its cap and its context)
        self._errors: list[BaseException] = []
        self.taken: list[process.ExecutorProcess] = []  # executors taken and not yet disposed (a candidate's)
        self.reaped: list[dict] = []  # how long each killed executor took to go, since the last take_reaped()
        self.paused: dict[int, set[int]] = {}  # id of a spare pause_spares stopped -> its pids (until resumed)
        self.refill(start=getattr(sup, "lanes", None) is None)  # lanes: started by the first evaluation

    def _spawn(self, trusted: bool = False) -> process.ExecutorProcess:
        s = self.sup
        return process.spawn(s.root, str(s.device), s.sandbox, s.memory_limit, s.host_memory_cap,
                             extra_env=s.executor_env, cpus=s.cpus.background if s.cpus else None)

    def refill(self, start: bool = True) -> None:
        """Spawn spares up to ``n``; ``start`` lets them touch the GPU (never while a candidate may be timed)."""
        self.spares = [p for p in self.spares if p.proc.poll() is None]
        while len(self.spares) < self.n:
            self.spares.append(self._spawn())
        if start:
            for p in self.spares:
                process.start(p)

    def set_target(self, n: int) -> None:
        """Keep ``n`` spares (at most as configured): the extra ones exit before this returns (their CUDA contexts
        are memory the evaluation's plan does not have); a higher target is filled as executors are disposed."""
        self.n = min(max(int(n), 0), self.max_n)
        while len(self.spares) > self.n:
            self.spares.pop().kill()

    def set_room(self, room_bytes: int, executor_bytes: int) -> None:
        """The current plan's free room (budget minus everything held, the reference cache's share included) and
        what one executor may hold: executors being reaped are waited for only when they may not fit the room."""
        self.room_bytes, self.executor_bytes = max(int(room_bytes), 0), max(int(executor_bytes), 0)

    def dying_bytes(self) -> int:
        """What the executors still being reaped may hold on the device."""
        return sum(b for t, _, b in self._reapers if t.is_alive())

    def take(self, beside_bytes: int = 0) -> process.ExecutorProcess:
        """A clean executor, started. cuda: a dying CUDA context still holds device memory, so the executors and
        the baseline set still being reaped are waited for unless the plan's room holds them, beside
        ``beside_bytes`` (the decoy's executor taken beside correctness uses that room itself)."""
        wait = (self.sup.device.type == "cuda" and self.dying_bytes() + self.sup.baselines.dying_bytes()
                + max(int(beside_bytes), 0) > self.room_bytes)
        self.join(wait=wait)
        if wait:
            self.sup.baselines.wait_reaped()
        p = self.spares.pop(0) if self.spares else self._spawn()
        try:
            process.await_ready(p, self.sup.limits["spawn_s"])
        except SpawnError:
            # A spare starts its CUDA context while the executor it replaces may still be dying; an executor
            # holds whatever device memory it took (no cap binds it from outside), so that start can fail for
            # want of memory. Once every disposed executor is gone, a new spare must start: only then is it the
            # machine's fault.
            p.kill()
            self.join()
            p = self._spawn()
            try:
                process.await_ready(p, self.sup.limits["spawn_s"])
            except SpawnError as e:
                if out_of_memory(str(e)):  # the spare's own log (nothing of a candidate's ran in it yet)
                    # a live candidate holds the memory (the decoy's executor is taken with the candidate's
                    # alive): judged as any OOM of the trusted side (Evaluation.run: memory_blame.oom_verdict)
                    raise torch.OutOfMemoryError(f"a clean executor could not start: {e}") from None
                raise HarnessError(str(e)) from e
        self.taken.append(p)
        return p

    def settle(self) -> None:
        """Every spare started is ready (lanes: before the lane lets the GPU go, nothing of it may still be
        creating its CUDA context). A spare that does not start is killed and dropped here (its replacement is
        spawned by the next refill, and a machine that cannot start one fails the next take loudly)."""
        for p in list(self.spares):
            if p.started and not p.ready:
                try:
                    process.await_ready(p, self.sup.limits["spawn_s"])
                except SpawnError:
                    p.kill()
                    self.spares.remove(p)

    def take_reaped(self) -> list[dict]:
        """The reapings finished since the last call (each ``gone_s``: from the kill to every process of it gone,
        its CUDA context with it; ``cleaned_s``: its work directory removed too), and forget them."""
        out = []
        while self.reaped:  # (the reapers' threads append meanwhile: what one adds now is in the next call's)
            out.append(self.reaped.pop(0))
        return out

    def pending(self) -> list:
        """The reapers of executors still dying now (an earlier evaluation's, seen from a new one)."""
        return [t for t, _, _ in self._reapers if t.is_alive()]

    def pause_spares(self) -> list[int]:
        """Stop the started spares (their CUDA contexts) for a timing phase. A spare not yet started goes on
        importing torch: it waits for its start frame before it touches the GPU (``executor.main``), and its CPU
        work runs on the background cores, never the timed sides' (``kbenv.sandbox.cpus``). Paused too, the one
        spawned when the decoy's executor was disposed had not finished importing when the next evaluation's
        decoy took it (1.2-3.1 s of that evaluation on the path, one-lane rollout, H100, stop 36)."""
        pids = []
        for p in self.spares:
            if p.started:
                stopped = p.pause()
                self.paused[id(p)] = set(stopped)
                pids += stopped
        return pids

    def resume_spares(self, pids: list[int]) -> None:
        process.ExecutorProcess.resume(pids)
        resumed = set(pids)
        self.paused = {k: v for k, v in self.paused.items() if not v & resumed}

    def dispose(self, p: process.ExecutorProcess, lease=None, start_spares: bool = True) -> None:
        """Kill now; wait for the exit (1-2 s for a CUDA context) off the result's path. An executor the fence
        holds is released first (the kill follows at once). A spare spawned in its place starts on the GPU only
        when ``start_spares`` (an evaluation's timing phase is still ahead when its decoy executor is disposed)."""
        self.sup.fence.release(p)
        pids = p.pids() if self.sup.device.type == "cuda" else []
        t_kill = time.monotonic()
        p.signal_kill()
        device_bytes, listed = self._held_after_kill(pids)
        if p in self.taken:
            self.taken.remove(p)
        lanes = getattr(self.sup, "lanes", None)
        # lanes: spares start only at an evaluation's beginning (Supervisor.evaluate), so that they are ready
        # before the lane lets the GPU go; the dying process keeps the lane's shared holds until it is gone
        self.refill(start=start_spares and lanes is None)
        hold = lanes.hold(gpu=True, candidates=True) if lanes is not None else None

        def reap():
            released = False
            try:
                context_gone = self._context_gone(listed, t_kill) if listed else None
                p.kill()
                gone = time.monotonic()
                if hold is not None:  # its processes are gone, their CUDA contexts with them: nothing of it dies now
                    hold.release()
                    released = True
                shutil.rmtree(p.workdir, ignore_errors=True)
                # a fact of the next evaluation (Evaluation.run): how long killed executors took to go
                self.reaped.append({"context_gone_s": context_gone, "gone_s": round(gone - t_kill, 3),
                                    "cleaned_s": round(time.monotonic() - t_kill, 3)})
            except BaseException as e:  # noqa: BLE001 - re-raised by join in the caller's thread
                self._errors.append(e)
            finally:
                if hold is not None and not released:
                    hold.release()
        t = threading.Thread(target=reap, daemon=True)
        t.start()
        # what stays held until it is reaped: the executor's memory, and the lent region its lease owns
        lent = lease.layout.total_bytes if lease is not None and lease.owns_region else 0
        self._reapers.append((t, lease, device_bytes + lent))

    def _is_paused(self, p) -> bool:
        """Whether ``p`` is a spare this pool paused and has not resumed (read beside the evaluation's thread: a
        lookup, never a scan of its processes)."""
        return bool(self.paused.get(id(p)))

    def _context_gone(self, listed: set[int], t_kill: float, limit_s: float = 10.0) -> float | None:
        """Seconds from the kill until NVML lists none of ``listed`` (the killed executor's processes it listed
        just after the kill): its CUDA contexts destroyed. A fact beside ``gone_s`` (every process of the sandbox
        reaped, which is when the lane's hold goes): whether the driver is done with a dying executor sooner than
        the host is. None where NVML stops answering or still lists them after ``limit_s``."""
        from kbenv.sandbox import gpustate
        while time.monotonic() - t_kill < limit_s:
            try:
                procs = gpustate.compute_processes(self.sup.device.index or 0)
            except (OSError, AttributeError, ValueError, TypeError):
                return None
            if procs is None:
                return None
            if not listed & {pid for pid, _ in procs}:
                return round(time.monotonic() - t_kill, 3)
            time.sleep(0.01)
        return None

    def _held_after_kill(self, pids: list[int]) -> tuple[int, set[int]]:
        """What a killed executor (``pids``, its processes) may still hold on the device while its CUDA context
        dies: what the driver reports them holding just after the kill was sent (NVML, never the executor's own
        word; nothing more is allocated once the kill lands, so the figure only falls), with ``DYING_SLACK`` for
        an allocation in flight as it was sent. The plan's figure for one executor (its cap and context) where
        NVML cannot say, or lists none of them (a context already gone, or pids it names otherwise). With it, the
        processes NVML listed (none where it listed none).

        Why: a taken executor waits for the dying ones unless they fit the plan's room (:meth:`take`), and with
        the plan's figure it waited in nearly every evaluation: three lanes on an H100 (stop 48), 1.4-2.1 s of
        each evaluation's 13 after the first three, which had nothing dying. An underestimate costs no verdict: an
        out-of-memory while an earlier executor dies runs the evaluation again (``memory_blame.oom_verdict``)."""
        from kbenv.sandbox import gpustate
        held, listed = gpustate.held_after_kill(self.sup.device.index or 0, pids)
        return (self.executor_bytes if held is None else held), listed

    def wait_reaped(self, until: float | None = None) -> None:
        """Wait for the executors being reaped (until ``until``, a monotonic time, if given), touching nothing else
        (another thread's; :meth:`join` finishes them, on the supervisor's thread, and raises what a reaping
        raised)."""
        for t, _, _ in list(self._reapers):
            t.join(None if until is None else max(0.0, until - time.monotonic()))

    def await_starts(self, until: float) -> None:
        """Wait, until ``until`` at most, for every started spare's ready frame to have arrived, reading nothing:
        safe beside the evaluation's thread, which may be taking one (``kbenv.sandbox.preempt``: the lane settles
        its spares ahead while its threads park; :meth:`settle` is what makes sure, once they have). A spare this
        pool paused is not waited for: stopped, it sends nothing before it is resumed. H100, stop 50 (stop 49's
        code), three lanes: a lane asked to give way during its own timing phase's set-up (its spares paused there,
        one of them still creating its context) waited out the whole park budget here, 2.0 s, in 11 of 16
        evaluations."""
        for p in list(self.spares):
            sock = p.sock
            if not p.started or p.ready or sock is None or self._is_paused(p):
                continue
            try:
                select.select([sock], [], [], max(0.0, until - time.monotonic()))
            except (OSError, ValueError):  # closed meanwhile (taken, or killed): nothing to wait for
                continue

    def join(self, wait: bool = True) -> None:
        """Finish reaping disposed executors: all of them (``wait``), or those already gone. A reaping that
        failed (a process that survived) is raised here either way. On the CPU nothing waits: a killed sandbox's
        namespace takes about 2 s to empty on the CI machine, and no device memory or timing depends on it."""
        keep = []
        while self._reapers:
            t, lease, held = self._reapers.pop()
            if not wait and t.is_alive():
                keep.append((t, lease, held))
                continue
            t.join()
            if lease is not None:
                lease.close()  # its region, on the supervisor's thread once the process is gone
        self._reapers = keep
        if self._errors:
            err = self._errors.pop()
            self._errors.clear()
            raise HarnessError(f"reaping an executor failed: {err!r}")

    def close(self) -> None:
        self.join()
        for p in self.spares:
            p.kill()
        self.spares = []

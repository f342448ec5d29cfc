"""Baselines: eager and ``torch.compile`` run through the same executor path as candidates, by trusted processes.

A baseline executor runs the problem's own ``Model`` (no candidate code ever). On cuda each evaluation gets
fresh baseline processes: a ``torch.compile`` process kept across evaluations ran slower after its first one on
the H200 (problems 23, 88 and dlrm/2 alike, with no recompilation logged: 88's 0.33 ms became 0.73-0.86 ms, 23's
6.1 ms 8.0-8.6 ms, eager unchanged), which no reward may inherit. They are spawned one evaluation ahead: the set
an evaluation will use is spawned (imports only, torch.compile's own among them, 5-8 s) when the evaluation before
it prepares its own, and started (its CUDA context) when that evaluation ends; a second imported set waits
behind it (the reserve) for an evaluation of another problem, when the first is opened ahead for the same one. Once the candidate has compiled, :meth:`BaselineExecutors.prepare` gives them their region and
models without waiting for anything, and, when this problem's baselines were once built with the GPU to
themselves (so torch.compile's autotuning choices are in the shared on-disk cache), their untimed warm-up runs
too, beside the candidate's correctness and decoy phases. The first build of a problem's baselines warms up in
the timing phase, with the candidate held. On the CPU one set is kept while the problem stays current. Their blocks are timed interleaved with the candidate's
(``kbenv.sandbox.timing``). The baseline executors of a problem share one lent region of their own (they never
run at the same time), never the candidate's.

A baseline that cannot be built or run is a fault of the harness (:class:`BaselineError`), unless a candidate's
executor was holding the memory it needed, which the evaluation attributes to the candidate (``oom``).
The medians of the paired runs are also kept on disk per (problem, device model, torch version, precision,
size), for reports and ``kbenv baselines build``; they never replace a paired measurement in a reward.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import torch

from kbenv.sandbox import process, protocol
from kbenv.sandbox.baseline_figures import state_name
from kbenv.sandbox.executors import CandidateFault, Deadline, Lease
from kbenv.sandbox.lent import LentRegion
from kbenv.sandbox.references import MODEL_SEED, HarnessError


def out_of_memory(log: str) -> bool:
    """Whether a trusted process's own log (never a candidate's) says that it ran out of device memory."""
    low = log.lower()
    return "out of memory" in low or "outofmemoryerror" in low


class BaselineError(HarnessError):
    """A baseline could not be measured: a harness fault, raised (never a low reward)."""


class BaselineExecutors:
    def __init__(self, sup, kinds: tuple):
        self.sup = sup
        self.kinds = kinds
        self.key = None
        self._leases: dict[str, Lease] = {}
        self._region: LentRegion | None = None
        self._ahead: dict[str, process.ExecutorProcess] = {}  # spawned for the next evaluation
        # A second set, imported and never started, behind ``_ahead``: a set opened ahead for the same problem at
        # done() consumes ``_ahead``, and an evaluation of another problem then found no imported set ready (it
        # waited 2.9 s per evaluation for torch's imports, 16 distinct problems back to back, H200, stop 34).
        # cuda only (on the CPU the test suite sets it): its imports are 5-8 s of CPU per set.
        self.reserve = sup.device.type == "cuda"
        self._reserve: dict[str, process.ExecutorProcess] = {}
        self._reapers: list = []
        self._warm = False
        self._ready = False  # started and built (ready()), not yet warmed
        self._owner: str | None = None  # the evaluation the current processes were opened for (cuda)
        self._warming: list[int] | None = None  # slots of the warm-up block sent early, replies not yet read
        self.setup_seconds: dict = {}  # where the latest evaluation's baseline setup spent its time (a fact)
        self.overhead_s = 0.0  # the fence's least cost, measured on these trusted processes (BlockCalibration's
        # figure for blocks of one call, and its figure before any estimate)
        self.cache_dir = Path(sup.cache_dir) / "baselines"
        self.cache_dir.mkdir(parents=True, exist_ok=True)

    @property
    def fresh(self) -> bool:
        """New processes for every evaluation (the default on cuda), or one set kept while the problem stays
        current (the default on the CPU, where no speed credit is given); ``Supervisor(fresh_baselines=)``."""
        return self.sup.fresh_baselines

    def _spawn(self, kind: str) -> process.ExecutorProcess:
        # trusted processes share torch.compile's and Triton's caches on disk (no candidate ever reads or writes
        # them): a fresh baseline process then loads its kernels instead of compiling them again
        env = {"TORCHINDUCTOR_CACHE_DIR": str(Path(self.sup.cache_dir) / "inductor"),
               "TRITON_CACHE_DIR": str(Path(self.sup.cache_dir) / "triton")}
        if kind == "compile":  # torch.compile's imports at spawn, off the evaluation's path (5 s of CPU on the
            env["KBENV_TRUSTED_PREIMPORT"] = "1"  # 2-core CPU machine: the eager baseline never needs them)
        if os.environ.get("KBENV_BASELINE_TORCH_LOGS"):  # diagnosis: torch's logs, kept in log_tail()
            env["TORCH_LOGS"] = os.environ["KBENV_BASELINE_TORCH_LOGS"]
        cpus = self.sup.cpus.background if self.sup.cpus else None
        return process.spawn(self.sup.root, str(self.sup.device), "none", None, False, trusted=True, extra_env=env,
                             cpus=cpus)

    def spawn_ahead(self, start: bool = True) -> None:
        """Spawn the next evaluation's baseline processes now, so that they import torch (and torch.compile) while
        the current evaluation runs; with ``start``, also let them create their CUDA contexts (never called while a
        candidate is timed). A process spawned and not started holds no device memory."""
        start = start and getattr(self.sup, "lanes", None) is None  # lanes: contexts only inside an evaluation
        for kind in self.kinds:
            p = self._ahead.get(kind)
            if p is None or p.proc.poll() is not None:
                p = self._ahead[kind] = self._spawn(kind)
            if start:
                process.start(p)

    def _key(self, st, layout) -> tuple:
        return (st.problem.id, st.size, st.precision, layout.slot_bytes, len(layout.slots))

    def _built_marker(self, st, layout) -> Path:
        """Present once this problem's baselines were built and warmed with the GPU to themselves, so that
        torch.compile's autotuning choices are in the shared on-disk cache (a later warm-up reads them)."""
        return self.cache_dir / "built" / f"{state_name(st, self.sup.device)}__{len(layout.slots)}x{layout.slot_bytes}"


    AHEAD = "ahead"  # the owner of processes opened before any evaluation claimed them (done(like=...))

    def prepare(self, st, layout, owner: str, example_inputs: list) -> None:
        """cuda, once the candidate of the evaluation ``owner`` has compiled: its fresh baseline processes get
        their region and build their models, and (once this problem's baselines were built clean before) run their
        untimed warm-up, all without waiting for a reply. Nothing of it is timed, and no baseline runs a timed
        call before the timing phase, where :meth:`leases` collects the replies with the candidate held."""
        if not self.fresh:
            return
        t0 = time.monotonic()
        alive = bool(self._leases) and all(l.proc.proc.poll() is None for l in self._leases.values())
        if self._owner == self.AHEAD and self.key == self._key(st, layout) and alive:
            # opened when the previous evaluation (of this same problem) ended: they are this evaluation's now
            self._owner = owner
            self.setup_seconds = {"prepare": round(time.monotonic() - t0, 4), "opened_ahead": True,
                                  "early_warmup": self._warming is not None}
        else:
            self._open(st, layout, owner, wait=False)
            if self._built_marker(st, layout).exists():
                self._send_warmup(layout, example_inputs)
            self.setup_seconds = {"prepare": round(time.monotonic() - t0, 4),
                                  "early_warmup": self._warming is not None}
        # The set after this one: spawned now, not started (its imports, torch.compile's among them, take 5-8 s
        # on the H200 and run during this evaluation; it touches the GPU only when done() starts it), and, where
        # done() will open a set ahead (taking that one), the reserve behind it, imported for another problem
        self.spawn_ahead(start=False)
        if self.reserve and self._room_for_dying() and getattr(self.sup, "lanes", None) is None:
            for kind in self.kinds:
                p = self._reserve.get(kind)
                if p is None or p.proc.poll() is not None:
                    self._reserve[kind] = self._spawn(kind)

    def _send_warmup(self, layout, example_inputs) -> None:
        ks = list(range(len(layout.slots)))
        for lease in self._leases.values():
            for k in ks:
                lease.write_inputs(k, example_inputs)
            lease.send_block(ks, "baseline warm-up")
        self._warming = ks

    def _open(self, st, layout, owner: str | None, wait: bool = True) -> None:
        self.close(keep_ahead=True, wait=not self._room_for_dying())
        self.key, self._owner, self._warm, self._ready = self._key(st, layout), owner, False, False
        try:
            if self.sup.device.type == "cuda":
                self._region = LentRegion(self.sup.device, layout.total_bytes)
            for kind in self.kinds:
                proc, spare = self._ahead.pop(kind, None), self._reserve.pop(kind, None)
                if proc is None or proc.proc.poll() is not None:  # no live set ahead: the reserve serves now
                    proc, spare = spare, None
                if spare is not None:  # the reserve moves up: the next set, already imported
                    self._ahead[kind] = spare
                if proc is None or proc.proc.poll() is not None:
                    proc = self._spawn(kind)
                if wait:
                    process.await_ready(proc, self.sup.limits["spawn_s"])
                else:
                    process.start(proc)  # its "ready" frame is read in leases(), before the setup's reply
                lease = Lease(proc, self.sup.device, layout, region=self._region)
                self._leases[kind] = lease
                lease.send_setup(protocol.Setup(st.problem.source, st.problem.overrides(st.size), "",
                                                str(self.sup.device), st.precision, MODEL_SEED,
                                                compile=kind == "compile", deliver=lease.route), "baseline setup")
            if not self.fresh:  # kept per problem: the next problem's processes import torch meanwhile
                self.spawn_ahead()
        except CandidateFault as f:
            self.close()
            raise BaselineError(f"the {st.problem.id} baseline failed: {f.reason}\n{f.error or ''}") from None

    def _mine(self, st, layout, reuse: bool, owner: str | None) -> bool:
        """Whether the current processes serve this evaluation: this problem and layout, alive, and opened for
        it (``owner``) or kept while the problem stays current (``reuse``)."""
        alive = bool(self._leases) and all(l.proc.proc.poll() is None for l in self._leases.values())
        mine = reuse or (owner is not None and owner == self._owner)
        return self.key == self._key(st, layout) and alive and mine

    @contextlib.contextmanager
    def _faults(self, st):
        """A baseline that cannot start or run: out of device memory is judged as any OOM of the trusted side
        (raised as ``torch.OutOfMemoryError``); anything else is the harness's (:class:`BaselineError`)."""
        try:
            yield
        except process.SpawnError as e:
            # A set is started (its CUDA contexts) when the previous evaluation ends, beside its dying executor,
            # and built with this evaluation's candidate held: either may hold whatever device memory its
            # candidate took (nothing binds an executor's from outside). Out of memory is then judged as any OOM
            # of the trusted side (memory_blame.oom_verdict); anything else is the harness's.
            self.close()
            if out_of_memory(str(e)):
                raise torch.OutOfMemoryError(f"a {st.problem.id} baseline process could not start: {e}") from None
            raise
        except CandidateFault as f:
            self.close()
            if f.category == "oom":
                raise torch.OutOfMemoryError(f"the {st.problem.id} baseline ran out of device memory: "
                                             f"{f.error}") from None
            raise BaselineError(f"the {st.problem.id} baseline failed: {f.reason}\n{f.error or ''}") from None

    def ready(self, st, layout, reuse: bool | None = None, owner: str | None = None) -> None:
        """The first part of :meth:`leases`: this evaluation's baseline processes started (their CUDA contexts)
        and their models built, waited for. Nothing of it is timed or shapes a later timing (no warm-up, so no
        autotuning, and no fence calibration), so it may overlap processes still dying: the timing phase waits for
        those only after this (an H100 rollout spent 1.0-1.9 s per evaluation on each wait, one after the other)."""
        reuse = (not self.fresh) if reuse is None else reuse
        if self._mine(st, layout, reuse, owner) and (self._warm or self._ready):
            return
        with self._faults(st):
            if not self._mine(st, layout, reuse, owner):
                self.setup_seconds = {}
                self._open(st, layout, owner)
            secs = self.setup_seconds
            t = time.monotonic()
            for lease in self._leases.values():
                process.await_ready(lease.proc, self.sup.limits["spawn_s"])
            secs["wait_ready"] = round(time.monotonic() - t, 4)
            t = time.monotonic()
            for lease in self._leases.values():
                lease.finish_setup(Deadline("baseline setup", 600))
            secs["wait_build"] = round(time.monotonic() - t, 4)
        self._ready = True

    def autotunes(self, st, layout, reuse: bool | None = None, owner: str | None = None) -> bool:
        """Whether :meth:`leases` would warm these baselines up for the first time: no set of this problem and
        layout was built with the GPU to itself (the marker), so torch.compile autotunes in that warm-up and its
        choices, kept on disk, shape every later timing. Lanes: such a warm-up waits for the GPU alone (the timing
        phase's exclusive hold), since another lane's work beside it would time the autotuner's candidates under
        load (before stop 48 it ran beside the other lanes, and the marker was written all the same)."""
        reuse = (not self.fresh) if reuse is None else reuse
        if self._warm and self._mine(st, layout, reuse, owner):
            return False
        return not self._built_marker(st, layout).exists()

    def leases(self, st, layout, example_inputs, reuse: bool | None = None, owner: str | None = None) -> dict[str, Lease]:
        """Warm trusted executors of every baseline kind for this problem and slot layout: on cuda the ones
        :meth:`prepare` opened for this evaluation (``owner``), or new ones; otherwise (``reuse``) the current
        ones while the problem stays current. Called with the candidate held, and (cuda) every disposed process
        gone: the warm-up autotunes torch.compile's kernels and the fence's cost is measured here."""
        reuse = (not self.fresh) if reuse is None else reuse
        if self._warm and self._mine(st, layout, reuse, owner):
            return self._leases
        self.ready(st, layout, reuse=reuse, owner=owner)
        with self._faults(st):
            secs = self.setup_seconds
            t = time.monotonic()
            ks = list(range(len(layout.slots)))
            if self._warming is None:  # warm-up (torch.compile compiles here), untimed, with the candidate held
                self._send_warmup(layout, example_inputs)
            for lease in self._leases.values():
                lease.finish_block(ks, Deadline("baseline warm-up", 900))
            self._warming = None
            secs["wait_warmup"] = round(time.monotonic() - t, 4)
            t = time.monotonic()
            if self.sup.device.type == "cuda":  # the CPU's blocks are not calibrated (no speed credit there)
                from kbenv.sandbox.timing import fence_overhead
                self.overhead_s = fence_overhead(next(iter(self._leases.values())), self.sup.fence)
            marker = self._built_marker(st, layout)
            lanes = getattr(self.sup, "lanes", None)
            alone = lanes is None or lanes.held()["gpu"] == "exclusive"  # lanes: no other lane's work beside it
            if not secs.get("early_warmup") and alone and not marker.exists():  # built with the GPU to themselves
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.touch()
            secs["calibrate"] = round(time.monotonic() - t, 4)
        self._warm = True
        return self._leases

    def done(self, like: tuple | None = None) -> None:
        """An evaluation has ended: on cuda its baseline processes go (reaped in the background, their region
        released once they are gone), and the next evaluation's start now. With ``like`` (the ended evaluation's
        ``(state, layout, example_inputs)``), and where the memory plan has room for the dying set beside a new
        one, the new set is opened for that same problem at once: it builds its models and warms up while the
        next evaluation compiles and is checked, and an evaluation of the same problem (a GRPO group's next
        completion) takes it over (:meth:`prepare`); any other problem closes it and opens its own."""
        if not self.fresh or self._owner == self.AHEAD:
            return  # (a set opened ahead that this evaluation did not take over, failing before it: kept)
        self.close(keep_ahead=True, wait=False)
        # lanes (kbenv.sandbox.lanes): no set is opened ahead, since its warm-up would run on the GPU after this
        # lane lets it go (while another lane may be timing)
        if like is not None and self._room_for_dying() and getattr(self.sup, "lanes", None) is None:
            st, layout, example_inputs = like
            try:
                self._open(st, layout, self.AHEAD, wait=False)
                if self._built_marker(st, layout).exists():
                    self._send_warmup(layout, example_inputs)
                return
            except (BaselineError, torch.OutOfMemoryError):
                # tried again, and raised or judged, when an evaluation needs them (the memory may be held by the
                # candidate just killed, still dying: nothing binds an executor's device memory from outside)
                self.close(keep_ahead=True, wait=False)
        self.spawn_ahead()

    def expect(self, problem_id: str, size: str, precision: str) -> None:
        """An evaluation of this problem starts: a set opened ahead for another problem goes now (before the
        evaluation allocates: its memory plan has no room for another problem's baselines), and processes are
        spawned ahead in its place."""
        if self._owner == self.AHEAD and (self.key is None or self.key[:3] != (problem_id, size, precision)):
            self.close(keep_ahead=True)
            self.spawn_ahead()

    def _room_for_dying(self) -> bool:
        """Whether the current memory plan has room for a baseline set still dying beside a new one (always on the
        CPU, where nothing waits for reaping)."""
        plan = getattr(self.sup, "plan", None)
        if self.sup.device.type != "cuda":
            return True
        return plan is not None and plan.room_bytes >= plan.baseline_bytes

    def started(self) -> list:
        """The processes of the current set (started: each may have GPU work of its own)."""
        return [l.proc for l in self._leases.values() if l.proc.proc.poll() is None]

    def join(self) -> None:
        """Wait for processes being reaped (their device memory is back once this returns)."""
        for t, _ in self._reapers:
            t.join()
        self._reapers = []

    def dying_bytes(self) -> int:
        """What baseline sets still being reaped may hold on the device: for each, what NVML reported its processes
        holding just after the kill (plus slack) and its lent region; the plan's figure for a set where NVML could
        not say. Sets are closed at every evaluation's end on cuda, and with the plan's figure the next evaluation's
        executor waited for the set to die wherever the plan's room was smaller (ExecutorPool.take)."""
        plan = getattr(self.sup, "plan", None)
        planned = plan.baseline_bytes if plan is not None else 0
        return sum(planned if b is None else b for t, b in list(self._reapers) if t.is_alive())


    def wait_reaped(self, until: float | None = None) -> None:
        """Wait for the sets being reaped (until ``until``, a monotonic time, if given) without touching the list
        (safe from the decoy's side thread, while the evaluation's thread may add to it; :meth:`join` clears it
        later)."""
        for t, _ in list(self._reapers):
            t.join(None if until is None else max(0.0, until - time.monotonic()))

    def close(self, keep_ahead: bool = False, wait: bool = True) -> None:
        leases, region = list(self._leases.values()), self._region
        self._leases, self._region, self.key, self._warm, self._owner = {}, None, None, False, None
        self._ready = False
        self._warming = None

        lanes = getattr(self.sup, "lanes", None)
        hold = lanes.hold(gpu=True) if lanes is not None and (leases or region is not None) else None

        def reap():
            try:
                for lease in leases:
                    lease.proc.kill()
                    lease.close()
                if region is not None:
                    region.close()
            finally:
                if hold is not None:  # a dying context may still run kernels: the lane's GPU hold until it is gone
                    hold.release()
        pids = [q for lease in leases for q in lease.proc.pids()] if self.sup.device.type == "cuda" else []
        for lease in leases:
            lease.proc.signal_kill()
        if leases or region is not None:
            import threading
            from kbenv.sandbox import gpustate
            held, _ = gpustate.held_after_kill(self.sup.device.index or 0, pids)
            t = threading.Thread(target=reap, daemon=True)
            t.start()
            self._reapers.append((t, None if held is None else held + (region.nbytes if region is not None else 0)))
        if wait:
            self.join()
        if not keep_ahead:
            for p in [*self._ahead.values(), *self._reserve.values()]:
                p.kill()
            self._ahead, self._reserve = {}, {}

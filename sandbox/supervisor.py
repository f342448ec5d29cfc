"""The trusted supervisor of one device: what lives across evaluations, and ``evaluate``.

It holds the secret, the reference cache, the pool of clean executors (spares), the trusted baseline
executors and the fence; each request becomes one :class:`~kbenv.sandbox.evaluation.Evaluation`, whose phases
read top to bottom. Candidate faults become typed results; faults of the harness (a reference that raises, a
baseline that cannot be measured, an executor that never starts, a bug here) raise :class:`HarnessError` and are
never turned into a low reward.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import tempfile
import threading
from pathlib import Path

import torch

from kbenv.sandbox import cpus, memplan, process, protocol
from kbenv.sandbox.baselines import BaselineError, BaselineExecutors
from kbenv.sandbox.builds import BuildFarm
from kbenv.sandbox.evaluation import Evaluation
from kbenv.sandbox.memory_blame import EarlierExecutorHeldMemory
from kbenv.sandbox.executors import CandidateFault
from kbenv.sandbox.fence import make_fence
from kbenv.sandbox.lent import SlotLayout
from kbenv.sandbox.pool import ExecutorPool
from kbenv.sandbox.process import SpawnError, have_bwrap
from kbenv.sandbox.references import HarnessError, References, Secret, nbytes
from kbenv.sandbox.result import EvalRequest, EvalResult
from kbenv.sandbox.timing import TimingPlan

__all__ = ["Supervisor", "ExecutorPool", "HarnessError", "BaselineError", "CandidateFault", "have_bwrap"]

DEFAULT_LIMITS = {"compile_s": 180.0, "trial_s": 120.0, "timing_s": 300.0, "spawn_s": 120.0}
# Used only where sandbox.peaks has no figure for the device (H200 SXM datasheet: 4.8 TB/s, ~990 TFLOP/s bf16
# dense, TF32 495 for fp32 so that split-TF32 schemes stay above the floor).
H200_PEAKS = {"bytes_per_s": 4.8e12, "flops": {"bf16": 990e12, "fp16": 990e12, "fp32": 495e12}, "name": "H200"}


class Supervisor:
    """Evaluates candidates for one device. Not thread-safe: one evaluation at a time (one per GPU).

    Args:
        device: ``cpu`` or ``cuda[:i]``.
        sandbox: ``bwrap`` (fail if missing), ``none`` (rlimits and a private directory only) or ``auto``.
        cache_dir: where baseline figures and torch.compile's cache persist.
        limits: per-phase wall-clock budgets in seconds (``compile_s``, ``trial_s`` for the whole correctness
            phase, ``timing_s`` for the whole timing phase, ``spawn_s``), enforced from outside the executor.
        timing: overrides of :class:`~kbenv.sandbox.timing.TimingPlan` (``min_rounds``, ``max_rounds``,
            ``budget_s``, ``target_rel_ci``, ``warmup_rounds``).
        reference_budget_bytes: LRU budget for cached reference inputs and outputs on the device.
        baselines: baseline kinds (``eager``, ``compile``); the faster is the speedup's denominator.
        memory_limit_bytes: the executor's host memory limit (address space on cpu; data segment on cuda
            when ``host_memory_cap``).
        secret: bytes every seed is derived from; random by default.
        keep_spare / spares: clean executors kept started ahead of the next evaluation (default 4 on cuda,
            2 on cpu; ``memplan.default_spares``).
        fresh_baselines: new baseline processes for every evaluation (default on cuda: a torch.compile process
            kept across evaluations measured slower after its first one on the H200).
        builders: concurrent sandboxed builds of candidates' C++/CUDA extensions ahead of their turn
            (:mod:`kbenv.sandbox.builds`; bubblewrap only; default on cuda a builder per four background cores,
            ``builds.default_workers``; 1 on cpu; 0 = none).
        decoy_beside: run the decoy's no-op rewrite beside correctness where the memory plan has room (default on
            cuda only: the CPU gives no speed credit and has no time to win on two cores, so it keeps the order
            that was verified there; a decoy beside costs an extra executor for every candidate, most of which
            fail correctness).
        lanes: how many supervisors share this device (:mod:`kbenv.sandbox.lanes`; default 1, the device to
            itself). With more, this one plans with its share of the device's memory (the budget over ``lanes``,
            under any cap), times alone, and judges again alone any verdict the sharing could have caused.
        lane_key: what names the shared device to the lanes (default: the GPU's UUID, or the host for cpu).
        lane_preempt: with lanes, give way to another lane's timing phase at this lane's checkpoints
            (:mod:`kbenv.sandbox.preempt`); default on, unless ``KBENV_LANE_PREEMPT=0``.
    """

    def __init__(self, device: str = "cpu", sandbox: str = "auto", cache_dir: str | os.PathLike | None = None,
                 limits: dict | None = None, timing: dict | None = None,
                 reference_budget_bytes: int | None = None, baselines: tuple | None = None,
                 memory_limit_bytes: int | None = None, secret: bytes | None = None, keep_spare: bool = True,
                 spares: int | None = None, host_memory_cap: bool | None = None,
                 fresh_baselines: bool | None = None, builders: int | None = None,
                 decoy_beside: bool | None = None, lanes: int = 1, lane_key: str | None = None,
                 lane_preempt: bool | None = None):
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        cuda = self.device.type == "cuda"
        self.lanes = None
        if int(lanes) > 1:
            from kbenv.sandbox.lanes import Lanes
            if cuda:  # this lane's share of the device's memory: every plan of it is made with that
                if memplan.gpu_lanes() not in (1, int(lanes)):
                    raise ValueError(f"lanes={lanes} but KBENV_GPU_LANES={memplan.gpu_lanes()}")
                memplan.set_gpu_lanes(int(lanes))
            self.lanes = Lanes(lane_key or _device_key(self.device), int(lanes))
        sandbox = os.environ.get("KBENV_SANDBOX", sandbox) if sandbox == "auto" else sandbox
        if sandbox == "auto":
            sandbox = "bwrap" if have_bwrap() else "none"
        if sandbox == "bwrap" and not have_bwrap():
            raise HarnessError("sandbox='bwrap' but bubblewrap is not installed (apt-get install bubblewrap)")
        self.sandbox = sandbox
        self.cache_dir = Path(cache_dir or os.environ.get("KBENV_CACHE", Path.home() / ".cache" / "kbenv"))
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        unknown = set(limits or {}) - set(DEFAULT_LIMITS)
        if unknown:
            raise ValueError(f"unknown limit(s) {sorted(unknown)}; known: {sorted(DEFAULT_LIMITS)}")
        self.limits = {**DEFAULT_LIMITS, **{k: float(v) for k, v in (limits or {}).items()}}
        self.timing_plan = TimingPlan.for_device(self.device, **(timing or {}))
        self._plan_cache = reference_budget_bytes is None  # else the caller's budget, as given
        self.refs = References(self.device, reference_budget_bytes or ((16 << 30) if cuda else (1 << 30)))
        self.memory_limit = memory_limit_bytes or (16 << 30)
        self.host_memory_cap = True if host_memory_cap is None else bool(host_memory_cap)
        self.secret = Secret(secret or os.urandom(32))
        self.root = Path(tempfile.mkdtemp(prefix="kbenv-sup-"))
        os.chmod(self.root, 0o711)  # executors (another uid) reach their own directory in it, and list nothing
        self.fence = make_fence(self.device)
        self.transient_lock = threading.Lock()  # one judge at a time holds the plan's transient memory
        self.plan: memplan.MemoryPlan | None = None  # the current evaluation's memory plan
        # the one long-lived thread an evaluation's side work runs on (the decoy beside correctness): a sandbox
        # spawned from a thread dies when that thread exits (bwrap --die-with-parent), so never a passing thread
        self.side = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kbenv-side")
        kinds = tuple(baselines) if baselines else (("eager", "compile") if cuda else ("eager",))
        self.fresh_baselines = cuda if fresh_baselines is None else bool(fresh_baselines)
        self.decoy_beside = cuda if decoy_beside is None else bool(decoy_beside)
        # a block of cores for the timing phase (the supervisor's timing thread, the candidate's executor and the
        # baseline processes, a core's worth each), and everything kbenv spawns runs on the others (kbenv.sandbox.cpus)
        self.cpus = cpus.CpuPlan.for_device(self.device, sides=2 + len(kinds))
        # the GPU's processes, clocks and throttle reasons as timing begins and ends, in the facts (gpustate)
        self.gpu_state_facts = False
        self.baselines = BaselineExecutors(self, kinds)
        if self.fresh_baselines:  # the first evaluation's baselines import torch while it starts (lanes: without
            self.baselines.spawn_ahead(start=self.lanes is None)  # their contexts until an evaluation holds the GPU)
        self.peaks = self._peaks()
        # Each evaluation takes two executors (the candidate's and the decoy's); memplan.default_spares says why
        # cuda keeps three started ahead (an executor's start-up, torch import and CUDA context, is 2-4 s there).
        # torch builds an extension for this exact architecture, in executors and ahead-of-time builders alike
        arch = "{}.{}".format(*torch.cuda.get_device_capability(self.device)) if cuda else None
        self.executor_env = {"TORCH_CUDA_ARCH_LIST": arch} if arch else {}
        n_builders = (None if cuda else 1) if builders is None else int(builders)  # None: builds.default_workers
        self.builds = (BuildFarm(self.root, str(self.device), arch, self.limits["compile_s"], self.memory_limit,
                                 n_builders, cpus=self.cpus.background if self.cpus else None,
                                 sharers=self.lanes.lanes if self.lanes else 1)
                       if sandbox == "bwrap" and n_builders != 0 else None)
        n_spares = spares if spares is not None else memplan.default_spares(self.device.type)
        self.pool = ExecutorPool(self, max(int(n_spares), 1) if keep_spare else 0)
        # lanes: this lane gives way to another's timing phase at its threads' checkpoints (kbenv.sandbox.preempt);
        # KBENV_LANE_PREEMPT=0 keeps every evaluation's shared hold of the GPU to its end, as before. Not with the
        # idle-probe fence (drivers without the process lock): it waits for the whole GPU, another lane's work too
        # KBENV_LANE_PREEMPT=checkpoints: not during a call (stop 45's behaviour, for a measured comparison)
        self.yielder = None
        # KBENV_LANE_PASS_ON=0: a timing phase keeps the GPU shared at its end even where another lane waits to time
        # (before stop 48; for a measured comparison of Lanes.timing's passing on)
        self.pass_on = os.environ.get("KBENV_LANE_PASS_ON", "1") != "0"
        mode = os.environ.get("KBENV_LANE_PREEMPT", "1")
        self.give_way_in_calls = mode != "checkpoints"
        if lane_preempt is None:
            lane_preempt = mode != "0"
        if self.lanes is not None and lane_preempt and self.fence.kind != "idle_probe":
            from kbenv.sandbox.preempt import Yielder, quiet_lane, wait_ahead
            self.yielder = Yielder(self.lanes, lambda: quiet_lane(self, split=self.yielder.add_split),
                                   ahead=lambda until: wait_ahead(self, until, split=self.yielder.add_split))

    # ----------------------------------------------------------------------------------------- evaluate
    def evaluate(self, req: EvalRequest) -> EvalResult:
        """Evaluate one candidate; see :class:`EvalRequest` and :class:`EvalResult` for the contract.

        Raises:
            MemoryPlanError: (a ``ValueError``) the evaluation cannot fit this device's memory, or the memory cap;
                checked before anything allocates, with one line naming the size that fits.
        """
        why = protocol.source_fault(req.candidate)
        if why is not None:  # refused before an executor, a reference or a baseline set is spent on it
            from kbenv.problems import get_problem
            prob = get_problem(req.problem)
            return EvalResult.format_failure(req, prob, req.precision or prob.precision_default, self.device.type,
                                             why, category="compile")
        self.fit_memory_plan(req.problem, req.size, req.precision)
        if self.lanes is None:
            return self._evaluate(req)
        from kbenv.sandbox.lanes import sharing_could_cause
        # Lanes: the evaluation shares the GPU with the other lanes' (its timing phase alone on it). A result the
        # sharing could have caused, and a harness fault (the trusted side out of memory that another lane's
        # candidate may hold), are judged again with this lane alone on the GPU, and that judgment counts.
        shared = None
        before = self._lane_facts()
        try:
            with self.lanes.evaluation():
                try:
                    self.pool.refill(start=True)
                    with self.working("evaluation_start"):
                        res = self._evaluate(req)
                finally:
                    self.pool.settle()
            if not sharing_could_cause(res):
                # how often this evaluation gave the GPU way to another lane's timing phase, or passed it on
                res.facts["lanes"] = {"lanes": self.lanes.lanes, "alone": False,
                                      **_since(self._lane_facts(), before)}
                return res
            shared = f"{res.verdict}: {res.category}: {res.reason}"[:300]
        except HarnessError as e:
            shared = f"harness fault: {e}"[:300]
        self.pool.join()  # this lane quiet: the holds of its dying processes released
        self.baselines.join()
        with self.lanes.alone():
            self.pool.refill(start=True)
            res = self._evaluate(req)
            self.pool.settle()
        res.facts["lanes"] = {"lanes": self.lanes.lanes, "alone": True, "shared_result": shared}
        return res

    def _lane_facts(self) -> dict:
        """The lane's counters (:meth:`Lanes.facts`, and :meth:`Yielder.facts` where it gives way)."""
        return {**self.lanes.facts(), **(self.yielder.facts() if self.yielder is not None else {})}

    # ---------------------------------------------------------------- giving way to another lane's timing phase
    def checkpoint(self, where: str = "") -> None:
        """A point where the calling thread has no GPU work of its own queued (kbenv.sandbox.preempt); ``where``
        names what it does next (a fact where it does not park in time)."""
        if self.yielder is not None:
            self.yielder.checkpoint(where)

    def working(self, where: str = "start"):
        """The calling thread uses the GPU for this lane until the block ends (kbenv.sandbox.preempt)."""
        return self.yielder.working(where) if self.yielder is not None else contextlib.nullcontext()

    def idle(self):
        """The calling thread waits for another thread of this lane (kbenv.sandbox.preempt)."""
        return self.yielder.idle() if self.yielder is not None else contextlib.nullcontext()

    @contextlib.contextmanager
    def transient_turn(self):
        """This thread's turn with the plan's transient memory (:attr:`transient_lock`: correctness and the decoy
        beside it take turns). Waiting for it is idle (:meth:`idle`: no GPU work of its own queued), so a thread
        waiting on the other's judging never keeps its lane from giving way; a thread that got its turn while the
        lane gave way parks, holding it, before it uses it, and the other, waiting, counts as parked too."""
        if not self.transient_lock.acquire(blocking=False):
            with self.idle():
                self.transient_lock.acquire()
        try:
            yield
        finally:
            self.transient_lock.release()

    def waiting_for_calls(self):
        """The calling thread waits for its executor's reply to a block of calls: idle (:meth:`idle`) unless
        ``KBENV_LANE_PREEMPT=checkpoints``."""
        return self.idle() if self.give_way_in_calls else contextlib.nullcontext()

    def _evaluate(self, req: EvalRequest) -> EvalResult:
        try:
            try:
                return Evaluation(self, req).run()
            except EarlierExecutorHeldMemory:
                # the trusted side ran out of memory that an earlier evaluation's dying executor held: that
                # evaluation's candidate, not this one, took it; this one runs again from the start, with
                # nothing of the earlier one left (a second time it is judged as any other)
                self.pool.join()
                self.baselines.join()
                return Evaluation(self, req, retried=True).run()
        except SpawnError as e:
            raise HarnessError(str(e)) from e

    def prebuild(self, sources: list[str]) -> int:
        """Start building the C++/CUDA extensions of candidates that will be evaluated here (and of their no-op
        rewrites, which the decoy phase imports), so that their compile phases only load them; how many builds
        were started or already known. Safe to call while an evaluation runs (the farm has its own lock)."""
        if self.builds is None:
            return 0
        from kbenv.sandbox import decoy
        todo: dict[str, None] = {}  # in order: the first candidate's build, then its decoy's, then the next one's
        for src in sources:
            if protocol.source_fault(src) is not None:  # its evaluation fails it before anything is built
                continue
            try:
                noop, kernels = decoy.noop_kernels(src)
            except decoy.Unrewritable:  # its evaluation fails it as a decoy at once; its own build may be made ahead
                noop, kernels = None, 0
            todo.update((s, None) for s in (src, noop if kernels else None) if s)
        return sum(self.builds.submit(s) for s in todo)

    def build_states(self, sources: list[str]) -> list[str]:
        """Each source's ahead-of-time build: ``none``, ``building`` or ``done`` (``BuildFarm.state``)."""
        return [self.builds.state(s) if self.builds is not None else "none" for s in sources]

    def fit_memory_plan(self, problem_id: str, size: str, precision: str | None) -> None:
        """The memory plan of an evaluation of ``problem_id`` (``kbenv.sandbox.memplan``): refused before anything
        allocates when it does not fit; otherwise the reference cache is held to the plan's share (unless set
        explicitly). ``kbenv baselines build`` fits it too (``baseline_figures.measure_alone``), so that its slots, and the marker
        of baselines built with the GPU to themselves, are an evaluation's."""
        from kbenv.problems import get_problem
        prob = get_problem(problem_id)
        precision = precision or prob.precision_default
        if precision not in prob.precision_allowed:
            return  # the evaluation refuses it, naming the allowed ones
        from kbenv.problems import ProblemError
        try:
            plan = memplan.preflight(prob, size, precision, self.device, spares=self.pool.max_n)
        except ProblemError as e:  # the problem's own code fails on the meta device: the harness's fault
            raise HarnessError(f"{prob.id}: the reference raised while its memory plan was made: {e}") from e
        self.plan = plan  # this evaluation's (the baselines' and the pool's room for dying processes)
        self.baselines.expect(prob.id, size, precision)
        self.pool.set_target(plan.spares)  # fewer spares where the plan has room for fewer
        # killed executors of earlier evaluations are not waited for while this plan has room for them
        self.pool.set_room(plan.room_bytes, plan.worker_bytes)
        if self._plan_cache:
            self.refs.fit(plan.reference_cache_bytes, (prob.id, size, precision))

    def warm(self, problem, size: str, precision: str) -> None:
        """Build a problem's reference ahead of its first candidate (lanes: as an evaluation shares the GPU)."""
        with self.lanes.evaluation() if self.lanes is not None else contextlib.nullcontext():
            st = self.refs.state(problem, size, precision)
            self.refs.pair(st, self.secret.seed(problem.id, size, "official"), "default")

    def wait_spare(self) -> None:
        for p in self.pool.spares:
            process.await_ready(p, self.limits["spawn_s"])

    def close(self) -> None:
        if self.yielder is not None:
            self.yielder.close()
        self.side.shutdown(wait=True)
        self.pool.close()
        self.baselines.close()
        if self.builds is not None:
            self.builds.close()
        self.refs.clear()
        self.release_memory()  # a closed supervisor leaves no device memory behind in this process
        shutil.rmtree(self.root, ignore_errors=True)
        if self.lanes is not None:
            self.lanes.close()

    # ------------------------------------------------------------------------------------ what phases ask
    def layout_for(self, st, example_inputs: list) -> SlotLayout:
        """Slots for one evaluation, counted by the memory plan's rule (``memplan.slot_count``)."""
        from kbenv.sandbox.memplan import device_budget_bytes, slot_count
        cuda = self.device.type == "cuda"  # cuda: outputs stay in the executor's memory, read there (not lent)
        one = SlotLayout.build(example_inputs, st.out_specs, 1).slot_bytes  # inputs and outputs: the plan's count
        budget = device_budget_bytes(self.device) if cuda else None
        share = self.plan.lend_share if self.plan is not None else None  # the share the plan could afford
        return SlotLayout.build(example_inputs, st.out_specs, slot_count(one, self.device.type, budget, share),
                                lend_outputs=not cuda)

    def _peaks(self) -> dict:
        if self.device.type != "cuda":
            return dict(H200_PEAKS, name="none (cpu)")
        try:
            from kbenv.sandbox import peaks
            p = peaks.peaks_for_device(self.device)
            if p is not None:
                return {"bytes_per_s": p.bytes_per_s, "flops": dict(p.flops), "name": p.name, "source": p.source}
        except Exception:  # noqa: BLE001 - fall back to the H200's figures, named in the facts
            pass
        return dict(H200_PEAKS)

    def floor_ms(self, problem, size: str, precision: str, inputs: list, outputs: list) -> float:
        """The physical floor at any size: the bytes the call must move at least (its outputs and the inputs
        the manifest does not exclude, read once) over peak bandwidth; at full size also the manifest's floor
        (FLOPs over the peak rate)."""
        excluded = set((getattr(problem, "floor_exclude", None) or {}).get("inputs", []))
        moved = sum(nbytes(x) for i, x in enumerate(inputs) if i not in excluded) + sum(nbytes(o) for o in outputs)
        flops = self.peaks["flops"].get(precision, self.peaks["flops"]["fp32"])
        floor = 1e3 * moved / self.peaks["bytes_per_s"]
        if size == "full":
            floor = max(floor, problem.floor_ms(precision, self.peaks["bytes_per_s"], flops))
        return floor

    def release_memory(self) -> None:
        """Hand the supervisor's freed device memory back to the driver: executors are other processes, and
        memory kept in this process's caching allocator is memory they cannot have."""
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def sandbox_description(self) -> str:
        if self.sandbox != "bwrap":
            return "none"
        bound = process.write_bound()
        writes = (f"writes bounded at {process.WRITE_QUOTA_BYTES >> 20} MiB" if bound else
                  "writes bounded only by the kernel's tmpfs default (bubblewrap before 0.8 in a user namespace)")
        if process.root_mode():
            return f"bwrap, executor as an unprivileged host uid of its own, {process.TASK_LIMIT} tasks, {writes}"
        tasks = f"{process.TASK_LIMIT} tasks" if process.userns_task_limit() else "no task limit (Linux < 5.14)"
        return f"bwrap, user namespace, {tasks}, {writes}"

    def free_device_bytes(self) -> int:
        """The device's free memory once the supervisor's own caches are released (the driver's figure)."""
        self.refs.drop_cached()
        torch.cuda.empty_cache()
        return torch.cuda.mem_get_info(self.device)[0]


def _device_key(device: torch.device) -> str:
    """What names a device to the lanes sharing it: a GPU's UUID (the same across Ray's renumbering of visible
    devices), or the host for the CPU."""
    if device.type == "cuda":
        uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
        if uuid is not None:
            return f"GPU-{uuid}".replace("GPU-GPU-", "GPU-")
        return f"cuda{device.index}"
    import socket
    return f"cpu-{socket.gethostname()}"


def _since(now: dict, before: dict) -> dict:
    """Counters' growth between two readings (nested dicts of numbers, keys new since counted from 0)."""
    return {k: _since(v, before.get(k) or {}) if isinstance(v, dict) else round(v - before.get(k, 0), 3)
            for k, v in now.items()}

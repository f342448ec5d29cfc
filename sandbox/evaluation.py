"""One evaluation of one candidate: its phases, top to bottom.

compile -> correctness (``correctness_phase``; the decoy beside it, where the memory plan has room) -> timing
(``timing_phase``) -> the decoy (``decoy_phase``, where it could not run beside correctness) -> verdict. Each phase
is a short method or a phase object over this evaluation's own state; each has a wall-clock budget enforced from
outside the executor (``Deadline``). An out-of-memory of the trusted side is judged by ``memory_blame``. Every
deciding fact is observed on the supervisor's side: outputs and inputs read from lent memory after the fence, the
supervisor's clock, and the supervisor's own no-op rewrite of the source. The executor's replies only ever fail a
candidate.
"""

from __future__ import annotations

import os
import threading
import time

import torch

from kbenv.problems import get_problem
from kbenv.rewards import precision as precision_contract
from kbenv.rewards.amdahl import share_for
from kbenv.rewards.verdict import judge_checks, trial_errors
from kbenv.sandbox import decoy, memory_blame, protocol
from kbenv.sandbox.correctness_phase import CorrectnessPhase
from kbenv.sandbox.decoy_phase import DecoyPhase, DecoyRun
from kbenv.sandbox.executors import CandidateFault, Deadline, Lease
from kbenv.sandbox.references import MODEL_SEED, HarnessError
from kbenv.sandbox.result import EvalRequest, EvalResult
from kbenv.sandbox.timing_phase import TimingPhase



PARK_HOLD_S = 5.0  # how long a parked decoy's queued GPU work may take to end before it is killed instead


class Evaluation:
    def __init__(self, sup, req: EvalRequest, retried: bool = False):
        self.sup, self.req = sup, req
        self.retried = retried  # run again after an earlier evaluation's executor held the memory it needed
        self.earlier = sup.pool.pending()  # executors of earlier evaluations still dying as this one begins
        self.device = sup.device
        self.problem = get_problem(req.problem)
        self.precision = req.precision or self.problem.precision_default
        if self.precision not in self.problem.precision_allowed:
            raise ValueError(f"{self.problem.id} does not run at {self.precision}; "
                             f"allowed: {self.problem.precision_allowed}")
        self.phases: dict[str, float] = {}
        self.lease: Lease | None = None
        self.eval_id = os.urandom(8).hex()
        self.prebuilt = False  # the candidate's extensions were built ahead (a fact of the result)
        self.decoy_source: str | None = None  # the supervisor's no-op rewrite of the candidate, where it has kernels
        self.build_wait_s = 0.0  # of the compile phase, the wait for the candidate's build still running ahead
        self.correctness_split: dict = {}  # where correctness spent its time (a fact, set once it ran)
        self._disposed = False  # the candidate's executor was disposed (once: after timing, or at the end)
        self._parked: list[tuple] = []  # (executor, lease): decoy runs that ended, held until timing has ended
        self._parked_lock = threading.Lock()  # the decoy's thread parks; the evaluation's disposes
        self.trial_errors: dict[int, float] = {}  # per output: the timed domain's trials' relative error
        self._ticks = threading.Lock()

    def _tick(self, name: str, t0: float) -> None:
        with self._ticks:  # the decoy's thread ticks too
            self.phases[name] = self.phases.get(name, 0.0) + time.monotonic() - t0

    # ------------------------------------------------------------------------------------------------ run
    def run(self) -> EvalResult:
        t_start = time.monotonic()
        req, problem = self.req, self.problem
        if req.share is not None:
            share, status, profile = float(req.share), "given", None
        else:
            share, status, profile = share_for(req.profile, problem.family, problem.set)
        res = EvalResult.empty(req, problem, self.precision, self.device, share)
        res.facts.update({"share_status": status, "profile": profile, "fence": self.sup.fence.kind,
                          "sandbox": self.sup.sandbox_description(),
                          # how long the executors killed since the last evaluation's start took to go
                          "reaped": self.sup.pool.take_reaped()})
        if self.retried:
            res.facts["retried"] = "run again: an earlier evaluation's dying executor held the memory it needed"
        # lanes: a checkpoint between the references' steps (each may be a second or more of a problem not yet
        # built: a sweep of distinct problems builds one every evaluation), where another lane waiting to time can
        # have the GPU; before, the first checkpoint came after them, at taking the executor
        check = self.sup.checkpoint
        try:
            check("references")
            self.st = self.sup.refs.state(problem, req.size, self.precision)
            self.official_seed = official_seed = self.sup.secret.seed(problem.id, req.size, "official")
            check("references")
            pair = self.sup.refs.pair(self.st, official_seed, "default")
            # shapes and dtypes only (meta tensors): the pair itself is never held between uses (official_inputs)
            self.official_spec = tuple([x.to("meta") if isinstance(x, torch.Tensor) else x for x in side]
                                       for side in pair)
            del pair
            check("references")
            self.contract = self.sup.refs.contract(self.st, official_seed)
            # timed calls draw zero-mean inputs where the contract applies (precision.timed_domain), held to the
            # contract measured on that domain
            self.timed_domain = precision_contract.timed_domain(problem.domains, self.contract.eligible)
            check("references")
            self.timed_contract = self.sup.refs.contract(
                self.st, self.sup.secret.seed(problem.id, req.size, "timed_contract"), self.timed_domain)
            self.layout = self.sup.layout_for(self.st, self.official_spec[0])
        except torch.OutOfMemoryError as e:
            # no executor of this evaluation exists yet: the memory is an earlier candidate's, still dying (run
            # again once it is gone), or nobody's (the harness's)
            if self.earlier and not self.retried:
                raise memory_blame.EarlierExecutorHeldMemory(str(e)[-500:]) from e
            raise HarnessError(f"{problem.id}: the references ran out of device memory with no candidate "
                               f"process alive: {e}") from e
        # the problem's reference model, the official pair and the contracts (built once per problem and size per
        # supervisor: a sweep of distinct problems builds one every evaluation)
        self._tick("references", t_start)
        res.facts["default_domain_tolerance"] = self.contract.facts()
        res.facts["timed_domain"] = self.timed_domain
        if self.timed_domain != "default":
            res.facts["timed_domain_tolerance"] = self.timed_contract.facts()
        # (each checkpoint: where another lane's timing phase may have the GPU meanwhile; named by what follows)
        self.sup.checkpoint("take_executor")
        t0 = time.monotonic()
        try:
            proc = self.sup.pool.take()
        except torch.OutOfMemoryError as e:  # no candidate of this evaluation exists yet, earlier ones are gone
            raise HarnessError(f"no clean executor could start: {e}") from e
        self._tick("worker_wait", t0)
        try:
            self.lease = Lease(proc, self.device, self.layout)
            res.facts["executor_uid"] = proc.uid
            self.run_phases(res)
        except CandidateFault as f:
            res.fail(f.category, f.reason, f.error)
        except torch.OutOfMemoryError as e:
            # its parked decoy ran the candidate's code too: killed with its executor, and counted with it
            f = memory_blame.oom_verdict(self.sup, proc, e, self.earlier, self.retried, others=self._take_parked())
            res.fail(f.category, f.reason, f.error)
        finally:
            t_finish = time.monotonic()  # its executors killed, the next baseline set opened: "finish"
            self._dispose_parked()
            self._dispose_executor(proc)
            if res.verdict != "pass":  # its decoy's build, if it has not started, goes: builders to the next ones
                self._withdraw_decoy_build()
            # cuda: this evaluation's baselines go; the next ones start, opened for this same problem unless the
            # request's hint names another (EvalRequest.next_problem)
            same = self.req.next_problem in (None, self.problem.id)
            like = None
            if self.req.measure_time and same:
                try:  # drawn again where the cache has not kept them (official_inputs)
                    like = (self.st, self.layout, self.official_inputs())
                except torch.OutOfMemoryError:  # (a dying executor's memory): no set opened ahead, nothing lost
                    like = None
            self.sup.baselines.done(like=like)
            self._tick("finish", t_finish)
        res.facts["slots"] = len(self.layout.slots)
        self.phases["total"] = time.monotonic() - t_start
        res.phase_seconds = {k: round(v, 4) for k, v in self.phases.items()}
        res.finalize_reward(req.reward_fn, share, req.fast_p)
        return res

    def run_phases(self, res: EvalResult) -> None:
        try:  # the decoy's no-op rewrite first: a source it cannot make is not judged further
            noop, kernels = decoy.noop_kernels(self.req.candidate)
        except decoy.Unrewritable as e:
            raise CandidateFault("decoy", f"the supervisor could not rewrite the candidate's source to make its "
                                          f"kernels no-ops ({e}), so that they produce the output cannot be "
                                          f"observed") from None
        self.decoy_source = noop if kernels else None
        if self.sup.builds is not None and self.decoy_source:  # it builds while the candidate compiles and runs
            self.sup.builds.submit(self.decoy_source)
        self.sup.checkpoint("compile")
        self.compile(self.lease, self.req.candidate, Deadline("compile", self.sup.limits["compile_s"]))
        self.sup.checkpoint("baseline_prepare")
        res.facts["prebuilt"] = self.prebuilt
        res.facts["build_wait_s"] = round(self.build_wait_s, 3)
        res.facts["builders"] = self.sup.builds.workers if self.sup.builds is not None else 0
        if self.req.measure_time:  # cuda: this evaluation's baselines build and warm up beside correctness and decoy
            t0 = time.monotonic()
            self.sup.baselines.prepare(self.st, self.layout, self.eval_id, self.official_inputs())
            self._tick("baseline_setup", t0)
        beside = DecoyRun(self)  # the decoy's own executor runs beside correctness (nothing in them is timed)
        try:
            per_trial = self.correctness(Deadline("correctness", self.sup.limits["trial_s"]))
            res.facts["correctness_split_s"] = self.correctness_split
            # what timed outputs are held to (timing_phase._recheck): the trials of the domain they are drawn from
            self.trial_errors = trial_errors(per_trial, self.timed_domain)
            verdict = judge_checks(per_trial)
            res.correct = verdict.correct
            if not verdict.passed:
                beside.abandon()  # its answer no longer matters: its executor is killed, not waited for
                res.set_verdict(verdict)
                return
            dec = self._decoy_beside(beside) if beside.beside else None
        except BaseException:  # a candidate's fault (or the harness's) in correctness: the decoy is not waited for
            beside.abandon()
            raise
        finally:
            with self.sup.idle():  # (another thread of the lane: idle counts as parked, see kbenv.sandbox.preempt)
                beside.join()
        self.sup.checkpoint("timing_setup")
        timing = self.timing(res) if self.req.measure_time else None
        self._dispose_parked()  # the decoy's executor held through timing dies beside the verdict and what follows
        if dec is None:
            # Where it could not run beside correctness it runs now, after the timing phase, alone: never in or
            # just before a timing phase, and with the candidate's executor gone first (its work is done), so
            # that the no-op run has the memory one worker is planned (a no-op run that fails for want of
            # memory is a decoy: the memory must be its own doing). Where the plan has no room for the dying
            # executor beside a new one, taking the decoy's executor waits for it (ExecutorPool.take).
            self._dispose_executor(self.lease.proc)
            t0 = time.monotonic()
            dec = self.decoy()
            self._tick("decoy", t0)
        res.facts["decoy"] = dec
        res.set_verdict(judge_checks(per_trial, timing=timing, decoy=dec))
        if res.verdict == "pass" and timing is not None:
            res.speedup = timing["speedup"]

    def _withdraw_decoy_build(self) -> None:
        """The candidate failed (or the evaluation did): its decoy's build, submitted ahead, is not needed; one
        not yet started is dropped, so the builders go to the batch's next candidates (``BuildFarm.withdraw``)."""
        if self.sup.builds is not None and self.decoy_source:
            self.sup.builds.withdraw(self.decoy_source)

    def _dispose_executor(self, proc) -> None:
        """The candidate's executor goes, once: killed now, reaped off the path (ExecutorPool.dispose)."""
        if not self._disposed:
            self._disposed = True
            self.sup.pool.dispose(proc, self.lease)

    def park(self, proc, lease) -> bool:
        """A decoy run that ended: its executor held (the fence: its submitted GPU work ended, no more can start,
        every process of it stopped) instead of killed, until the timing phase has ended
        (:meth:`_dispose_parked`). A killed CUDA context takes 1.5-1.8 s to go (H100, stop 44), and none may be
        dying on the GPU while the baselines warm up or anything is timed, so a decoy killed as correctness ended
        was waited for on the path into timing; held, it is as quiet as the candidate's own executor is then, and
        dies beside the verdict and the next evaluation's start. Its replacement spare is spawned now (not
        started: no GPU context while a timing phase is ahead). False where it cannot be held (work of its own
        still running): the caller kills it now."""
        try:
            self.sup.fence.hold(proc, PARK_HOLD_S)
        except CandidateFault:
            return False
        with self._parked_lock:
            self._parked.append((proc, lease))
        self.sup.pool.refill(start=False)
        return True

    def parked_pids(self) -> list[int]:
        with self._parked_lock:
            return [pid for p, _ in self._parked for pid in p.pids()]

    def _take_parked(self) -> list[tuple]:
        with self._parked_lock:
            parked, self._parked = self._parked, []
        return parked

    def _dispose_parked(self) -> None:
        """Parked decoy executors go: released by the fence and killed, reaped off the path."""
        for proc, lease in self._take_parked():
            self.sup.pool.dispose(proc, lease)

    def _decoy_beside(self, beside: "DecoyRun") -> dict:
        """The decoy run beside correctness, once correctness passed: its result (waited for here, on the path)."""
        t0 = time.monotonic()
        with self.sup.idle():
            dec = beside.result()
        if dec.get("noop_failure"):
            # The no-op run failed beside correctness. A failure decides the decoy check, so it must not be one
            # that running beside could cause (memory, time, the GPU shared): the run is made again, after
            # correctness and alone, and that one decides.
            first = dec["noop_failure"]
            dec = self.decoy()
            dec["beside_failure"] = first
        self._tick("decoy", t0)  # only the wait on the evaluation's path
        return dec

    # -------------------------------------------------------------------------------------------- compile
    def compile(self, lease: Lease, source: str, deadline: Deadline, phase: str | None = "compile") -> None:
        """The executor imports ``source`` and builds its model. An extension build of this exact source made
        ahead (:mod:`kbenv.sandbox.builds`: submitted before this evaluation, or the decoy's at its start) is
        handed to it first, so that it only loads it; otherwise it compiles, within the same deadline."""
        t0 = time.monotonic()
        prebuilt = ""
        # this thread only waits here (for a build ahead, then the executor's reply), with no GPU work of its own
        # queued: a lane may give way meanwhile, holding the executor (kbenv.sandbox.preempt). A compile can last
        # long (an import that sleeps, an extension still building), and another lane's timing phase waited it out
        with self.sup.idle():
            if self.sup.builds is not None and self.sup.builds.submitted(source):
                prebuilt = self.sup.builds.install(source, lease.proc.workdir, deadline.at - time.monotonic())
            if source == self.req.candidate:
                self.prebuilt = bool(prebuilt)
                self.build_wait_s = time.monotonic() - t0
            lease.setup(protocol.Setup(self.problem.source, self.problem.overrides(self.req.size), source,
                                       str(self.device), self.precision, MODEL_SEED, deliver=lease.route,
                                       prebuilt=prebuilt), deadline)
        if phase:
            self._tick(phase, t0)

    # ---------------------------------------------------------------------------------------- correctness
    def correctness(self, deadline: Deadline) -> list:
        """The correctness phase (``kbenv.sandbox.correctness_phase``): every trial run and judged."""
        return CorrectnessPhase(self).run(deadline)

    def official_inputs(self) -> list:
        """The official inputs: the reference cache's, or drawn again from their seed (the same values) where the
        cache could not keep them. Never held by the evaluation between uses: the memory plan counts one pair in
        flight beside the cache, and the official pair held throughout beside it ran an H100 out of memory on
        problem 47 at full size (stop 42)."""
        hit = self.sup.refs.cached(self.st, self.official_seed, "default")
        return hit[0] if hit is not None else self.sup.refs.inputs(self.st, self.official_seed, "default")

    def official_outputs(self, inputs: list) -> list:
        """The official reference outputs, given the official inputs the caller holds: cached, or computed again
        from them."""
        hit = self.sup.refs.cached(self.st, self.official_seed, "default")
        return hit[1] if hit is not None else self.sup.refs.outputs(self.st, inputs, "default")

    # ---------------------------------------------------------------------------------------------- decoy
    def decoy(self, run: "DecoyRun | None" = None) -> dict:
        """The decoy phase (``kbenv.sandbox.decoy_phase``): the supervisor's no-op rewrite, run and judged."""
        return DecoyPhase(self).run(run)

    # --------------------------------------------------------------------------------------------- timing
    def timing(self, res: EvalResult) -> dict:
        """The paired timing phase (``kbenv.sandbox.timing_phase``)."""
        return TimingPhase(self).run(res)

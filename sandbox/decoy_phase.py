"""The decoy phase of one evaluation: the supervisor's own no-op rewrite of the candidate's source, run and judged.

The supervisor rewrites every ``@triton.jit`` and ``__global__`` body of the source into a no-op
(``kbenv.sandbox.decoy``) and runs that in a fresh executor on the official inputs. If the no-op version still
returns a correct output, the kernels do not produce it (a decoy: ``rewards.verdict.decoy_checks``). A no-op run
that returns no output also fails the check. Beside correctness (:class:`DecoyRun`) where a fence waits for one
process's work and the memory plan has room; otherwise after the timing phase, alone (``Evaluation.run_phases``).

A run that ended is parked (``Evaluation.park``): its executor held by the fence (its GPU work ended, no more can
start, its CPU stopped, as the candidate's is through the baselines' set-up) and killed once the timing phase has
ended, so that its death (1.5-1.8 s for a CUDA context on an H100) is no longer waited for on the way into timing.
A run that failed is killed at once, as before.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import TYPE_CHECKING

from kbenv.rewards.verdict import Trial, judge as judge_trials
from kbenv.sandbox import decoy
from kbenv.sandbox.correctness_phase import run_block
from kbenv.sandbox.executors import CandidateFault, Deadline, Lease
from kbenv.sandbox.lent import PATTERN_A, PATTERN_B, SlotLayout
from kbenv.sandbox.timing import PhaseSplit

if TYPE_CHECKING:
    from kbenv.sandbox.evaluation import Evaluation


class DecoyPhase:
    def __init__(self, ev: "Evaluation"):
        self.ev = ev

    def run(self, run: "DecoyRun | None" = None) -> dict:
        """The supervisor's own no-op rewrite of the source, run in a fresh executor on the official inputs
        (in :class:`DecoyRun`'s thread, beside correctness; ``run`` learns the executor, so that it can kill it)."""
        if run is None:  # on the evaluation's own thread
            return self._run(None)
        # a thread of the lane beside the evaluation's (kbenv.sandbox.preempt)
        with self.ev.sup.working("decoy_start"):
            return self._run(run)

    def _run(self, run: "DecoyRun | None") -> dict:
        ev = self.ev
        t0 = time.monotonic()
        source, kernels = decoy.noop_kernels(ev.req.candidate)  # made once already (run_phases): it can be made
        out = {"custom_kernels": kernels, "noop_correct": None, "beside": run is not None}
        split = PhaseSplit()  # where the decoy's time goes: its executor, its build, its call and judging (a fact)
        if kernels and source is not None:
            ev.sup.checkpoint("decoy_take_executor")
            with split("take_executor"):
                # beside correctness it holds the plan's decoy room: processes still dying wait unless they fit
                # the room beside it (ExecutorPool.take)
                plan = getattr(ev.sup, "plan", None)
                proc = ev.sup.pool.take(beside_bytes=plan.decoy_bytes if run is not None and plan else 0)
            lease, parked = None, False
            try:
                if run is not None:
                    run.using(proc)
                    # the no-op rewrite's build, made ahead: waited for here only while the run still matters
                    until = time.monotonic() + ev.sup.limits["compile_s"]
                    with split("build_wait"), ev.sup.idle():  # (a fact: on the GPU's path once correctness ended)
                        while (ev.sup.builds is not None and ev.sup.builds.building(source)
                               and not run.abandoned and time.monotonic() < until):
                            time.sleep(0.05)
                    if run.abandoned:
                        raise CandidateFault("crash", "the decoy run was abandoned")
                lease = Lease(proc, ev.device, SlotLayout.build(ev.official_spec[0], ev.st.out_specs, 1,
                                                                lend_outputs=ev.device.type != "cuda"))
                ev.sup.checkpoint("decoy_compile")
                with split("compile"):
                    ev.compile(lease, source, Deadline("decoy", ev.sup.limits["compile_s"]), phase=None)

                def judge(domain, seed, inputs, outs, mut, meta):
                    v = judge_trials([Trial("default", inputs, ev.official_outputs(inputs), outs, None, meta, PATTERN_A,
                                            PATTERN_B)],
                                     ev.precision, ev.problem.invariants, ev.problem.tolerance)
                    out["noop_correct"] = v.correct
                with split("call_and_judge"):
                    run_block(ev, lease, [("default", None, PATTERN_A)], Deadline("decoy", ev.sup.limits["trial_s"]),
                              judge)
                with split("park"):
                    parked = ev.park(proc, lease)  # held, not killed: its death is off the timing phase's path
            except CandidateFault as f:
                # the no-op version returned no output: nothing shows that the kernels produce it (a decoy:
                # rewards.verdict.decoy_checks); a run beside correctness is made again alone first (run_phases)
                out["noop_correct"] = None
                out["noop_failure"] = f.category
                out["noop_reason"] = (f.reason or "")[:300]
            finally:
                if not parked:  # a run that failed: killed now, reaped off the path
                    ev.sup.pool.dispose(proc, lease, start_spares=False)
        ev.sup.release_memory()
        out["seconds"] = round(time.monotonic() - t0, 4)
        out["split_s"] = split.seconds()
        return out


class DecoyRun:
    """The decoy phase beside correctness: the no-op rewrite's executor compiles and runs while the candidate's
    trials are judged (untimed work both; the supervisor's judging takes turns, ``Supervisor.transient_lock``).

    It runs on the supervisor's one long-lived side thread (``Supervisor.side``), never on a thread of its own:
    bubblewrap's ``--die-with-parent`` is the parent-death signal, which Linux sends when the *thread* that
    spawned the sandbox exits, so a spare executor started from a short-lived thread dies with it.
    :meth:`result` waits for it and re-raises what it raised (a harness fault stays one). :meth:`abandon` (the
    candidate failed correctness) kills its executor so nothing waits for it; whatever the killed run then raises
    is dropped, since its answer decides nothing."""

    def __init__(self, ev: "Evaluation"):
        self._lock = threading.Lock()
        self._proc = None
        self._abandoned = False
        self._ev = ev
        self._future = None
        self.beside = self.may_run_beside(ev)
        if self.beside:
            self._future = ev.sup.side.submit(ev.decoy, self)

    @staticmethod
    def may_run_beside(ev: "Evaluation") -> bool:
        """Beside correctness only where a fence waits for one process's work (the idle-probe fence, for drivers
        without the process lock, waits for the whole GPU, so a decoy beside would stretch the candidate's
        fences), and only where the memory plan has room for a second worker and its lent slot beside everything
        it holds while the supervisor judges (``MemoryPlan.decoy_room``; the plan keeps that room out of the
        elastic cache where it can): an out-of-memory that the decoy's executor caused must never be judged the
        candidate's. Elsewhere it runs after the timing phase, alone."""
        if not getattr(ev.sup, "decoy_beside", True) or ev.sup.fence.kind == "idle_probe":
            return False
        plan = getattr(ev.sup, "plan", None)
        if ev.device.type != "cuda":
            return True
        return plan is not None and plan.decoy_room

    def using(self, proc) -> None:
        """The decoy's executor, once taken: killed now if the run was abandoned meanwhile."""
        with self._lock:
            self._proc = proc
            if self._abandoned:
                proc.signal_kill()

    @property
    def abandoned(self) -> bool:
        return self._abandoned

    def abandon(self) -> None:
        with self._lock:
            self._abandoned = True
            if self._proc is not None:
                self._proc.signal_kill()

    def join(self) -> None:
        if self._future is not None:
            concurrent.futures.wait([self._future])

    def result(self) -> dict:
        if self._future is None:
            self._future = self._ev.sup.side.submit(self._ev.decoy, self)
        return self._future.result()

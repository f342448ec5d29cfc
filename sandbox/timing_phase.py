"""The timing phase of one evaluation: the candidate's blocks against its baselines' blocks, on the supervisor's clock.

Set-up (spares paused, the candidate held, the baselines started beside the processes still dying, then every
disposed process reaped and the baselines warmed), then rounds:
every slot's inputs written (drawn from the evaluation's timed domain: zero-mean where the precision contract
applies, ``precision.timed_domain``), then each side in turn (the order alternating by round) has its output
places poisoned, the L2 evicted and one block timed (``kbenv.sandbox.timing.time_block``); after the candidate's
block a secret quarter of its calls are re-checked. The rounds stop on the plan's rule (``TimingPlan``) and the
speedup is the ratio of typical times (``kbenv.sandbox.timing.speedup``). Nothing here believes the executor.
"""

from __future__ import annotations

import contextlib
import math
import time

import torch

from kbenv.rewards import checks as C
from kbenv.sandbox import baseline_figures, gpustate, memplan
from kbenv.sandbox.baselines import BaselineError
from kbenv.sandbox.executors import CandidateFault, Deadline, Lease
from kbenv.sandbox.lent import PATTERN_A
from kbenv.sandbox.result import EvalResult
from kbenv.sandbox.timing import (BaselineSchedule, BlockCalibration, PhaseSplit, Series, TimingPlan,
                                  calibration_calls, cycled_calls, fastest, flush_l2, settling, speedup, time_block)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


class TimingPhase:
    def __init__(self, ev):
        self.ev = ev
        self.sup, self.st, self.lease, self.layout = ev.sup, ev.st, ev.lease, ev.layout
        self.device, self.problem, self.req = ev.device, ev.problem, ev.req
        self.precision, self.eval_id = ev.precision, ev.eval_id

    def run(self, res: EvalResult) -> dict:
        t_phase = time.monotonic()
        setup = PhaseSplit()  # where the time before the first block goes (a fact)
        with setup("release_memory"):
            self.sup.release_memory()
        paused = self.sup.pool.pause_spares()
        with contextlib.ExitStack() as lane:
            # the spares resume last, once the lane has the GPU shared again (lanes: a timing phase that passes the
            # GPU straight on waits, quiet, through the next lane's timing phase: Lanes.timing)
            lane.callback(self.sup.pool.resume_spares, paused)
            return self._run(res, setup, paused, lane, t_phase)

    def _run(self, res: EvalResult, setup: PhaseSplit, paused: list, lane: contextlib.ExitStack, t_phase: float):
        """Set-up with the candidate held (the baselines started, every disposed process gone, the baselines
        warmed; lanes: then the GPU alone), then the timed rounds."""
        sup, st = self.sup, self.st
        # the candidate held while the baselines are built and warmed (torch.compile autotunes on the GPU)
        with setup("hold_candidate"):
            sup.fence.hold(self.lease.proc, 30.0)
        with setup("baseline_ready"):  # their contexts and models: nothing timed or timing-shaping, so this
            sup.baselines.ready(st, self.layout, owner=self.eval_id)  # overlaps the processes still dying
        # every disposed executor has exited (a failed decoy run's, earlier evaluations'; cuda: a dying CUDA context
        # must not share the GPU with the baselines' warm-up, where torch.compile autotunes, nor with timing). A decoy
        # run that ended is held, not dying (Evaluation.park): it is killed once this phase ends
        with setup("reap_executors"):
            sup.pool.join(wait=self.device.type == "cuda" or sup.lanes is not None)
        with setup("reap_baselines"):
            sup.baselines.join()  # and an earlier evaluation's baseline processes
        # lanes: a first warm-up (torch.compile autotunes, and its choices are kept) waits for the GPU alone
        alone_warmup = sup.lanes is not None and sup.baselines.autotunes(st, self.layout, owner=self.eval_id)
        if not alone_warmup:
            with setup("baseline_leases"):
                bases = sup.baselines.leases(st, self.layout, self.ev.official_inputs(), owner=self.eval_id)
        if sup.lanes is not None:
            # lanes (kbenv.sandbox.lanes): the GPU alone from here to the phase's end; this lane is quiet while it
            # waits (its candidate held, its spares paused, everything it disposed of reaped, its baselines warm
            # or, for a first warm-up, built and idle)
            with setup("lane_wait"):
                lane.enter_context(sup.lanes.timing(settle=self._settle if sup.pass_on else None))
        if alone_warmup:
            with setup("baseline_leases"):
                bases = sup.baselines.leases(st, self.layout, self.ev.official_inputs(), owner=self.eval_id)
            res.facts["baseline_warmup_alone"] = True
        res.facts["timing_setup_s"] = setup.seconds()
        res.facts["baseline_setup"] = dict(sup.baselines.setup_seconds)
        self.ev._tick("baseline_setup", t_phase)
        # the timed sides on a block of cores nothing else of kbenv uses (kbenv.sandbox.cpus)
        sides = [self.lease.proc.pids()] + [l.proc.pids() for l in bases.values()]
        shared = ("shared: too few CPUs to reserve a core per timed side" if self.device.type == "cuda"
                  else "shared: the CPU's times earn no credit")
        with sup.cpus.timing(sides, ["candidate", *bases]) if sup.cpus else contextlib.nullcontext(shared) as fact:
            res.facts["cpus"] = fact
            watch = getattr(sup, "gpu_state_facts", False)
            roles = {"candidate": sides[0], **dict(zip(bases, sides[1:])),
                     "spare": [pid for p in sup.pool.spares for pid in p.pids()],
                     "decoy_held": self.ev.parked_pids()} if watch else {}
            before = gpustate.snapshot(self.device.index or 0, roles) if watch else None
            out = self._timed_rounds(res, bases, paused)
            if watch:  # what held a context, the clocks and why, as timing began and ended (NVML; a fact only)
                res.facts["gpu_state"] = {"start": before, "end": gpustate.snapshot(self.device.index or 0, roles)}
            return out

    def _timed_rounds(self, res: EvalResult, bases: dict, paused: list) -> dict:
        sup, st = self.sup, self.st
        t0 = time.monotonic()
        plan: TimingPlan = sup.timing_plan
        deadline = Deadline("timing", sup.limits["timing_s"])
        n = len(self.layout.slots)
        # the fixed cost per block removed from every side's blocks (BlockCalibration), each trusted estimate
        # against a trusted block of m calls (a few slots: cycled over them, timing.calibration_calls)
        calib = BlockCalibration(sup.baselines.overhead_s)
        m = calibration_calls(n, self.layout.slot_bytes, memplan.l2_bytes(self.device))
        cand = Series("candidate", calls=n, overhead_s=calib.least_s)
        series = {name: Series(name, calls=n, overhead_s=calib.side_s(name)) for name in bases}
        replay: list = []
        rng = torch.Generator().manual_seed(sup.secret.seed("picks", self.eval_id))
        t_budget = time.monotonic() + plan.budget_s
        rounds = 0
        stopped_by = "max_rounds"  # why the rounds ended (a fact): interval, budget or max_rounds
        split = PhaseSplit()  # where each round's wall time went (a fact: the timed blocks are a part of it)
        watch = getattr(sup, "gpu_state_facts", False) and self.device.type == "cuda"
        clocks: dict = {}  # side -> the SM clock (MHz) read just after each of its blocks (a fact only)
        schedule = BaselineSchedule(plan, list(bases))  # which baselines each round times (TimingPlan.prune_ratio)
        try:
            for r in range(plan.warmup_rounds + plan.max_rounds):
                seeds = [sup.secret.seed("time", self.eval_id, r, k) for k in range(n)]
                counted = r - plan.warmup_rounds  # this round's index among the counted ones (< 0: warm-up)
                timed = {name: bases[name] for name in schedule.timed(counted)}
                regions = [self.lease] + list({id(l.region): l for l in timed.values()}.values())
                with split("inputs"):
                    for k, seed in enumerate(seeds):  # one input set alive at a time: full-size sets are GiBs
                        x = sup.refs.inputs(st, seed, self.ev.timed_domain)  # zero-mean where the contract applies
                        for lease in regions:
                            lease.write_inputs(k, x)
                        del x
                    sup.release_memory()
                sides = [("candidate", self.lease)] + list(timed.items())
                blocks: dict = {}  # this round's per-call seconds by side, as timed
                if r % 2:
                    sides.reverse()
                for name, lease in sides:
                    with split("poison_flush"):
                        for k in range(n):
                            lease.poison_outputs(k, PATTERN_A)
                        flush_l2(self.device)
                    with split(name):
                        if name == "candidate":
                            sup.fence.release(self.lease.proc)
                            per_call = time_block(self.lease, sup.fence, deadline, max(deadline.at - time.monotonic(), 1))
                        else:
                            per_call = self._baseline_block(name, lease)
                    blocks[name] = per_call
                    if watch:
                        clocks.setdefault(name, []).append(gpustate.sm_clock(self.device.index or 0))
                    if name == "candidate":
                        with split("recheck"):
                            replay += self._recheck(seeds, rng, r)
                    if counted >= 0:
                        (cand if name == "candidate" else series[name]).add(counted, per_call)
                # a calibration that would time a cycled long block for some side (few slots) is the costly kind
                cycled = m != n and any(cycled_calls(m, n, blocks[name]) != n for name in timed)
                if self._calibrates(plan, r, cycled):  # the block's fixed cost again, under this
                    # round's machine state (TimingPlan.calibrates): each baseline timed this round its own, and
                    # the candidate's own, which only caps what its blocks lose (its faults are its own)
                    with split("block_calibration"), self._trusted_faults("calibration", timed):
                        calib.measure(timed, blocks, sup.fence, self.device, Deadline("calibration", 60.0), n, m)
                    with split("block_calibration"):
                        calib.measure_own(self.lease, blocks["candidate"], sup.fence, self.device, deadline,
                                          max(deadline.at - time.monotonic(), 1), n)
                    for name, s in series.items():
                        s.overhead_s = calib.side_s(name)
                    # the compared baseline's, capped by the candidate's own (BlockCalibration.candidate_s)
                    cand.overhead_s = calib.candidate_s(fastest(series))
                if r >= plan.warmup_rounds:
                    rounds += 1
                    schedule.after_round(counted, series)
                    why = plan.stop(rounds, speedup(cand, series).paired_rel_ci95 if rounds >= plan.min_rounds
                                    else math.inf, time.monotonic() > t_budget, time.monotonic() - t0)
                    if why is not None:
                        stopped_by = why
                        break
        finally:
            for lease in bases.values():  # the trusted sides run again (kept for the next evaluation, or closed)
                sup.fence.release(lease.proc)
            self.ev._tick("timing", t0)
        best_name = fastest(series)
        cand.overhead_s = calib.candidate_s(best_name)
        sp = speedup(cand, series)
        best = series[sp.best]
        # reported only: what the least-intercept rule (stops 48-53) would have paid, for comparison on one record
        least_sp = speedup(Series("candidate", list(cand.raw_s), n, calib.least_s, list(cand.rounds)), series)
        # the removed intercepts: their noise (beside the interval), and how far they may understate the candidate
        intercept_ci, intercept_gap = calib.uncertainty(sp.best, cand.typical[0], best.typical[0], n)
        floor_ms = sup.floor_ms(self.problem, self.req.size, self.precision, *self.ev.official_spec)
        res.baseline = {"best": best.name, "best_ms": best.median_ms, "best_typical_ms": 1e3 * best.typical[0],
                        "paired": True, **{f"{s.name}_ms": s.median_ms for s in series.values()}}
        res.timings = {"median_ms": cand.median_ms, "typical_ms": 1e3 * cand.typical[0], "rounds": rounds,
                       "budget_s": plan.budget_s, "stopped_by": stopped_by,
                       # the longest block a calibration timed, in calls (cycled over the slots where they are few)
                       "calls_per_block": n, "calibration_calls": max(calib.long_calls.values(), default=n),
                       # removed from the candidate's blocks (BlockCalibration.candidate_s, by the rule named), and
                       # from each trusted side's own
                       "block_overhead_ms": round(1e3 * cand.overhead_s, 4),
                       "block_overhead_rule": calib.candidate_rule(best_name),
                       "block_overhead_by_side_ms": {name: round(1e3 * calib.side_s(name), 4) for name in series},
                       "block_overhead_estimates_ms": {name: [round(1e3 * c, 4) for c in est]
                                                       for name, est in calib.estimates.items()},
                       "fence_overhead_ms": round(1e3 * calib.fence_s, 4),
                       "fence_overhead_setup_ms": round(1e3 * sup.baselines.overhead_s, 4),
                       "baseline_per_call_ms": {s.name: [round(1e3 * x, 5) for x in s.per_call_s]
                                                for s in series.values()},
                       # null where too few rounds bound them (the CPU's two): a record is strict JSON
                       "speedup_rel_ci95": _finite(sp.rel_ci95), "paired_rel_ci95": _finite(sp.paired_rel_ci95),
                       "intercept_rel_ci95": round(intercept_ci, 4), "intercept_gap_rel": round(intercept_gap, 4),
                       "own_intercept_estimates_ms": [round(1e3 * c, 4) for c in calib.own],
                       "speedup_least_intercept": _finite(round(least_sp.ratio, 5)),
                       "floor_ms": floor_ms,
                       "per_call_ms": [round(1e3 * x, 5) for x in cand.per_call_s]}
        res.facts["spare_paused"] = len(paused)
        res.facts["baselines_pruned"] = schedule.pruned  # timed only every few rounds after that many: far slower
        res.facts["baselines_restored"] = schedule.restored  # timed every round again: within prune_ratio after all
        res.facts["round_split_s"] = split.seconds()
        res.facts["settling"] = settling([cand, *series.values()])  # the phase's first rounds against the rest
        if watch:
            res.facts["sm_mhz_after_block"] = clocks
        baseline_figures.record(sup.baselines.cache_dir, st, sup.device, dict(res.baseline))
        return {"median_ms": cand.median_ms, "typical_ms": 1e3 * cand.typical[0], "floor_ms": floor_ms,
                "replay_checks": replay, "speedup": sp.ratio}

    def _settle(self) -> bool:
        """At the timing block's end, the lane as quiet as it was while it waited to time (its candidate held after
        its block, the baselines idle between calls, its spares paused, nothing of it dying): only the supervisor's
        own queued work (its references, its re-checks) is left, and it ends here. True where the lane is quiet
        (``Lanes.timing``: the GPU may then pass straight to another lane's timing phase)."""
        if not self.sup.fence.holds(self.lease.proc):
            return False
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return True

    def _calibrates(self, plan: TimingPlan, r: int, cycled: bool = False) -> bool:
        """Whether round ``r`` measures the block's fixed cost (cuda only: the CPU's times earn no credit)."""
        return self.device.type == "cuda" and plan.calibrates(r, cycled)

    def _baseline_block(self, name: str, lease: Lease) -> float:
        """A trusted baseline's block, under its own deadline (its failures: :meth:`_trusted_faults`)."""
        self.sup.fence.release(lease.proc)  # held since its last block, as the candidate is: like measurements
        with self._trusted_faults(name, {name: lease}):
            return time_block(lease, self.sup.fence, Deadline(f"{name} baseline", 60.0), 60.0)

    @contextlib.contextmanager
    def _trusted_faults(self, name: str, leases: dict):
        """A trusted baseline's work (a timed block, the block calibration's): a failure of it is the harness's
        (BaselineError), never the candidate's, except running out of device memory, which is judged like any OOM
        of the trusted side while a candidate is alive (the candidate's ``oom`` if killing it frees the memory)."""
        try:
            yield
        except CandidateFault as f:
            for lease in leases.values():
                self.sup.fence.release(lease.proc)
            if f.category == "oom":
                raise torch.OutOfMemoryError(f"the {name} baseline ran out of device memory: {f.error}") from None
            raise BaselineError(f"the {self.problem.id} {name} baseline failed while timed: {f.reason}\n"
                                f"{f.error or ''}") from None

    def _recheck(self, seeds: list, rng: torch.Generator, r: int) -> list:
        """With the candidate held after its block: a secret quarter of the block's calls (at least one)
        re-checked against references for their inputs (drawn again from their seeds, on the timed domain), their
        whole outputs judged as that domain's trials are and against those trials' own error
        (``check_timed_output``), and their inputs compared whole with the supervisor's copy (mutation)."""
        n = len(seeds)
        picks = torch.randperm(n, generator=rng)[:max(1, n // 4)].tolist()
        out = []
        for k in picks:
            inputs_k = self.sup.refs.inputs(self.st, seeds[k], self.ev.timed_domain)
            refs = self.sup.refs.outputs(self.st, inputs_k, self.ev.timed_domain)
            got = self.lease.read_outputs(k)
            for j, (ref, o) in enumerate(zip(refs, got)):
                # the whole output, judged as the trials are and against the trials' own error (chunk by chunk: a
                # float64 copy of a 6 GiB output took 23's re-checks 1 s)
                out += C.check_timed_output(ref, o, self.precision, f"timed_round{r}_call{k}_output{j}",
                                            self.ev.trial_errors.get(j), self.ev.timed_contract.tolerance)
            same, detail = self.lease.inputs_unchanged(k, inputs_k)
            if not same:
                out.append(C.Check(f"timed_round{r}_call{k}_inputs_unchanged", False, detail=detail,
                                   category="mutation"))
            del refs, got, inputs_k
        self.sup.release_memory()
        return out

"""The correctness phase of one evaluation, and the untimed block it (and the decoy phase) runs.

The trials, packed into blocks shaped exactly like the timing phase's (one call per lent slot, every slot with
fresh inputs written by the supervisor, one fence at the end), so that a call cannot tell a trial from a timed
call: the official inputs, each broader domain, fresh official inputs, then the official inputs again in a later
block (determinism: a stale output of an earlier call cannot pass it). Slots no trial needs get fresh official
inputs (fillers, not judged), and each block's order is drawn from the supervisor's secret. Every output and
input is read from memory the supervisor maps itself, after its own fence, and judged against the supervisor's
references (``rewards.verdict.correctness_checks``); the executor's replies only ever fail the candidate.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

import torch

from kbenv.rewards import checks as C
from kbenv.rewards.verdict import Trial, correctness_checks
from kbenv.sandbox import protocol
from kbenv.sandbox.executors import CandidateFault, Deadline, Lease
from kbenv.sandbox.lent import PATTERN_A, PATTERN_B
from kbenv.sandbox.timing import PhaseSplit

if TYPE_CHECKING:
    from kbenv.sandbox.evaluation import Evaluation


def _either_failed(a: C.Check, b: C.Check) -> C.Check:
    """One mutation check over both runs of the official inputs."""
    return a if not a.passed else b


def claims_fault(done: protocol.Done) -> CandidateFault | None:
    """The executor's own claim that an output is of the wrong type, dtype, shape or count (believed: it only
    fails the candidate)."""
    for i, c in enumerate(done.claims):
        if isinstance(c, protocol.OutputClaim):
            cat = "wrong_shape" if c.kind in ("shape", "count") else "wrong_type"
            return CandidateFault(cat, f"output {i}: wrong {c.kind} ({c.detail})" if c.kind != "count" else c.detail)
    return None


class CorrectnessPhase:
    def __init__(self, ev: "Evaluation"):
        self.ev = ev

    def run(self, deadline: Deadline) -> list:
        """Every trial block run and judged: ``(domain, checks)`` per trial, the official trial first. Where the
        phase's time went is left in ``ev.correctness_split`` (a fact)."""
        ev = self.ev
        t0 = time.monotonic()
        per_trial, first = [], {}

        def judge(domain, seed, inputs, outs, mut, meta):
            if domain == "default":
                first.update(outs=outs, mut=mut, meta=meta)
            elif domain == "again":
                meta = [{**a, "aliases_input": a["aliases_input"] or b["aliases_input"]}
                        for a, b in zip(first.pop("meta"), meta)]
                per_trial.insert(0, self._checks("default", inputs, ev.official_outputs(inputs), first.pop("outs"),
                                                 outs, _either_failed(first.pop("mut"), mut), 0, meta))
            else:
                refs = ev.sup.refs.outputs(ev.st, inputs, domain)
                per_trial.append(self._checks(domain, inputs, refs, outs, None, mut, len(per_trial) + 1, meta))

        split = PhaseSplit()  # where correctness's time goes: inputs, calls and fence, the judging turn, judging
        try:
            for block in self.trial_blocks():
                run_block(ev, ev.lease, block, deadline, judge, split)
        finally:
            ev.correctness_split = split.seconds()
            ev._tick("correctness", t0)
        return per_trial

    def trial_blocks(self) -> list[list]:
        """The trials in blocks of one call per slot. Each trial: (domain, seed or None for the official pair,
        poison pattern)."""
        ev = self.ev
        sec, pid, size, n = ev.sup.secret, ev.problem.id, ev.req.size, len(ev.layout.slots)
        trials = [("default", None, PATTERN_A)]
        # broader-domain draws are new in every evaluation (as the fresh trial is): an output allocation can hold
        # what a process of an earlier evaluation left for the same inputs, and only the official set repeats
        trials += [(d, sec.seed(pid, size, "domain", d, ev.eval_id), PATTERN_A) for d in ev.problem.domains[1:]]
        trials.append(("fresh", sec.seed(pid, size, "fresh", ev.eval_id), PATTERN_A))
        blocks = [trials[i:i + n] for i in range(0, len(trials), n)]
        again = ("again", None, PATTERN_B)
        if len(blocks) > 1 and len(blocks[-1]) < n:
            blocks[-1].append(again)
        else:
            blocks.append([again])
        for b, block in enumerate(blocks):
            block += [("filler", sec.seed(pid, size, "filler", ev.eval_id, b, k), PATTERN_A)
                      for k in range(len(block), n)]
            order = torch.randperm(n, generator=torch.Generator().manual_seed(sec.seed("order", ev.eval_id, b)))
            block[:] = [block[i] for i in order.tolist()]
        return blocks

    def _checks(self, domain, inputs, refs, outs, outs_b, mutation, seed, meta) -> tuple[str, list]:
        ev = self.ev
        trial = Trial(domain.replace("fresh", "default"), inputs, refs, outs, outs_b, meta, PATTERN_A, PATTERN_B)
        # the default domain and the timed domain are held to their contracts (the same as the problem's own
        # tolerance where the contract does not apply), the other broader domains to the problem's tolerance
        tolerance = {"default": ev.contract.tolerance, ev.timed_domain: ev.timed_contract.tolerance}.get(
            trial.domain, ev.problem.tolerance)
        cs = correctness_checks(trial, ev.precision, ev.problem.invariants, tolerance, seed=seed)
        cs.append(mutation)
        return trial.domain, cs


def trial_inputs(ev: "Evaluation", domain: str, seed) -> list:
    """A trial's inputs: the official pair's (seed None), or drawn from the supervisor's seed."""
    if seed is None:
        return ev.official_inputs()
    return ev.sup.refs.inputs(ev.st, seed, "default" if domain in ("fresh", "filler") else domain)


def run_block(ev: "Evaluation", lease: Lease, block: list, deadline: Deadline, judge,
              split: PhaseSplit | None = None) -> None:
    """One untimed block (a correctness block, or the decoy's): every slot's inputs written (one input set alive at
    a time) and its output places poisoned, one call per slot, the fence; then, with the executor held,
    ``judge(domain, seed, inputs, outputs, mutation_check, meta)`` for every slot that is not a filler. A claim of
    the executor fails the candidate. ``split``: where the block's time goes (a fact)."""
    split = split or PhaseSplit()
    sup = ev.sup
    sup.checkpoint("block")
    # the supervisor's transient memory (an input set in flight, references, output copies, the checks'
    # temporaries) is planned for one thread at a time: correctness and the decoy beside it take turns, in
    # writing inputs as in judging
    with split("inputs"), sup.transient_turn():
        for k, (domain, seed, pattern) in enumerate(block):
            lease.write_inputs(k, trial_inputs(ev, domain, seed))
            lease.poison_outputs(k, pattern)
        sup.release_memory()
        if ev.device.type == "cuda":
            torch.cuda.synchronize(ev.device)
    with split("calls"):
        # this thread only waits for the executor's reply, with no GPU work of its own queued: a lane may give
        # way meanwhile (kbenv.sandbox.preempt), the executor held mid-call by the fence. A block can last long
        # (a first call's Triton compile, a slow kernel), and another lane's timing phase waited it out. What
        # the candidate can learn (a pause inside a call) marks only an untimed call: timing phases never give
        # way, so no call is ever known to go unchecked
        with sup.waiting_for_calls():
            dones = lease.call_block(list(range(len(block))), deadline)
        sup.fence.hold(lease.proc, max(deadline.at - time.monotonic(), 1.0))
    # the supervisor's transient memory (references, output copies, the checks' temporaries) is planned for
    # one judge at a time: correctness and the decoy beside it take turns
    turn = contextlib.ExitStack()
    with split("judge_turn"):
        turn.enter_context(sup.transient_turn())
    with turn, split("judge"):
        _judge_block(ev, lease, block, dones, judge)
    sup.checkpoint("after_block")


def _judge_block(ev: "Evaluation", lease: Lease, block: list, dones: list, judge) -> None:
    try:
        for done in dones:
            fault = claims_fault(done)
            if fault is not None:
                raise fault
        for k, (domain, seed, _) in enumerate(block):
            if domain == "filler":
                continue
            inputs = trial_inputs(ev, domain, seed)
            same, detail = lease.inputs_unchanged(k, inputs)
            judge(domain, seed, inputs, lease.read_outputs(k),
                  C.Check("inputs_unchanged", same, detail=detail, category="mutation"), lease.output_meta(k))
            del inputs
            ev.sup.release_memory()
    finally:
        ev.sup.fence.release(lease.proc)

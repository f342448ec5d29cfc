"""Who is blamed when the trusted side runs out of device memory.

Nothing binds an executor's device memory from outside (a candidate can take all of it, and its process holds it
until it is reaped, 1-2 s after the kill on the H200). So an out-of-memory of the trusted side is judged by what
the driver reports once each candidate is gone: the earlier evaluation's dying executor first (then this
evaluation runs again: it is not judged for another candidate's memory), then this one's own (its ``oom``), and
only memory that stays taken with no candidate alive is a fault of the harness. Clean processes (a spare, a
baseline) that cannot start for want of memory are judged the same way; any other start failure is the harness's.
The GPU side of this is ``test_gpu.py::test_a_candidate_that_fills_the_device_harms_neither_the_harness_nor_the_next_evaluation``.
"""

import threading
from types import SimpleNamespace as NS

import pytest
import torch

from kbenv.sandbox import process
from kbenv.sandbox.memory_blame import OOM_SLACK, EarlierExecutorHeldMemory, candidate_allowance, oom_verdict
from kbenv.sandbox.result import EvalRequest
from kbenv.sandbox.supervisor import HarnessError, Supervisor

from test_faults import GOOD, PID

GiB = 1 << 30


class _Proc:
    killed = False

    def kill(self):
        self.killed = True


def _sup(frees: list, allowed: int | None = 2 * GiB):
    """A supervisor's state as oom_verdict sees it on cuda: the driver's free memory, read in turn, and what the
    plan lets a candidate's processes hold (``allowed``)."""
    reads = iter(frees)
    joined = []
    plan = None if allowed is None else NS(explain=lambda: "the plan's parts", worker_bytes=allowed - OOM_SLACK,
                                           decoy_bytes=0)
    return NS(device=torch.device("cuda"), pool=NS(join=lambda: joined.append(1)),
              free_device_bytes=lambda: next(reads), joined=joined, plan=plan)


def _dying():
    t = threading.Thread(target=lambda: None)
    t.start()
    return t


def test_an_earlier_evaluations_dying_executor_that_held_the_memory_makes_this_one_run_again():
    proc, err = _Proc(), torch.OutOfMemoryError("CUDA out of memory")
    with pytest.raises(EarlierExecutorHeldMemory):
        oom_verdict(_sup([8 * GiB]), proc, err, [_dying()])


def test_the_candidate_that_held_the_memory_is_the_one_blamed():
    proc, err = _Proc(), torch.OutOfMemoryError("CUDA out of memory")
    sup = _sup([0, 8 * GiB])  # still taken once the earlier executor is gone; free once this one is killed
    f = oom_verdict(sup, proc, err, [_dying()])
    assert f.category == "oom" and proc.killed and sup.joined  # its decoy's executor was reaped too
    assert "more than the 2.0 GiB its plan allows" in f.reason
    f = oom_verdict(_sup([0, 8 * GiB]), _Proc(), err, [_dying()], retried=True)
    assert f.category == "oom"  # run again once: the second time it is judged like any other
    f = oom_verdict(_sup([1 * GiB, 9 * GiB]), _Proc(), err, [])
    assert f.category == "oom"


def test_memory_still_taken_with_no_candidate_alive_is_the_harnesss_fault():
    with pytest.raises(HarnessError, match="no candidate process alive"):
        oom_verdict(_sup([0, 0]), _Proc(), torch.OutOfMemoryError("x"), [_dying()])


def test_the_reason_says_whether_the_candidate_held_more_than_its_plan_lends_it(caplog):
    """Stop 42 (an H100): an honest kernel for problem 47 at full size was paid 0 as ``oom`` while the supervisor
    held 32 GiB against 14 planned (causes fixed). A reading after the kill cannot tell the plan's undercount from a
    candidate's transient peak, and raising a harness fault there would let a candidate raise one at will (a thread
    that allocates and frees while the supervisor draws inputs): so it stays the candidate's ``oom``, and the reason
    and a warning say that its processes gave back no more than the plan lends them."""
    f = oom_verdict(_sup([1 * GiB, 2.5 * GiB], allowed=2 * GiB), _Proc(), torch.OutOfMemoryError("x"), [])
    assert f.category == "oom" and "no more than the 2.0 GiB its plan allows" in f.reason
    assert any("within its plan" in r.getMessage() for r in caplog.records)
    f = oom_verdict(_sup([0, 2 * GiB + 1], allowed=2 * GiB), _Proc(), torch.OutOfMemoryError("x"), [])
    assert f.category == "oom" and "more than the 2.0 GiB its plan allows" in f.reason


def test_the_allowance_is_the_candidates_executor_and_its_decoys_by_the_plan():
    from kbenv.sandbox import memplan as M
    plan = M.plan("kernelbench/level1/47", "full", None, int(79.18 * GiB), 2, host_budget=1 << 50)
    assert candidate_allowance(plan) == plan.worker_bytes + plan.decoy_bytes + OOM_SLACK
    assert candidate_allowance(None) is None


def test_the_evaluation_that_was_not_to_blame_runs_again_and_says_so(cache_dir, monkeypatch):
    from kbenv.sandbox import evaluation as E
    sup = Supervisor(device="cpu", cache_dir=cache_dir, limits={"spawn_s": 30})
    real_run, runs = E.Evaluation.run, []

    def run(self):
        runs.append(self.retried)
        if not self.retried:
            raise EarlierExecutorHeldMemory("CUDA out of memory")
        return real_run(self)
    monkeypatch.setattr(E.Evaluation, "run", run)
    try:
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD, measure_time=False))
        assert runs == [False, True] and r.verdict == "pass" and "retried" in r.facts, (runs, r.facts)
    finally:
        sup.close()


@pytest.mark.parametrize("log,expect", [("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate", "oom"),
                                        ("ImportError: broken install", HarnessError)])
def test_a_clean_process_that_cannot_start_for_want_of_memory_is_judged_as_an_oom(log, expect, cache_dir, monkeypatch):
    """A baseline process that cannot start: out of memory (its own, trusted log says so) is judged like any OOM of
    the trusted side (on the CPU: the candidate's, which was alive); anything else raises."""
    sup = Supervisor(device="cpu", cache_dir=cache_dir, fresh_baselines=True, limits={"spawn_s": 30})
    real = process.await_ready

    def await_ready(p, timeout_s):
        if p.trusted and not p.ready:
            raise process.SpawnError(f"the executor process did not start (ChannelClosed()); log:\n{log}")
        return real(p, timeout_s)
    monkeypatch.setattr(process, "await_ready", await_ready)
    try:
        if expect is HarnessError:
            with pytest.raises(HarnessError, match="broken install"):
                sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
        else:
            r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
            assert r.verdict == "fail" and r.category == expect, (r.category, r.reason, r.error)
    finally:
        monkeypatch.setattr(process, "await_ready", real)
        sup.close()


def test_a_spare_that_cannot_start_beside_a_dying_executor_is_replaced(cache_dir, monkeypatch):
    """A spare's start failing once (beside a dying executor) is retried after the dying are reaped; the
    evaluation goes on."""
    sup = Supervisor(device="cpu", cache_dir=cache_dir, limits={"spawn_s": 30})
    real, failed = process.await_ready, []

    def await_ready(p, timeout_s):
        if not p.trusted and not p.ready and not failed:
            failed.append(p)
            raise process.SpawnError("the executor process did not start; log:\nCUDA error: out of memory")
        return real(p, timeout_s)
    monkeypatch.setattr(process, "await_ready", await_ready)
    try:
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD, measure_time=False))
        assert failed and r.verdict == "pass", (r.category, r.reason, r.error)
        assert failed[0].proc.poll() is not None  # the spare that failed is gone
    finally:
        monkeypatch.setattr(process, "await_ready", real)
        sup.close()


@pytest.mark.parametrize("earlier", [True, False])
def test_references_that_run_out_of_memory_before_any_executor_exists(earlier, cache_dir, monkeypatch):
    """Before this evaluation takes an executor, device memory can only be held by an earlier candidate's dying
    executor (the evaluation runs again once it is gone) or by nobody's (a harness fault): never this candidate's."""
    sup = Supervisor(device="cpu", cache_dir=cache_dir, limits={"spawn_s": 30})
    real_state, failed = sup.refs.state, []

    def state(*a, **k):
        if not failed:
            failed.append(1)
            raise torch.OutOfMemoryError("CUDA out of memory")
        return real_state(*a, **k)
    monkeypatch.setattr(sup.refs, "state", state)
    monkeypatch.setattr(sup.pool, "pending", lambda: [_dying()] if earlier else [])
    try:
        if earlier:
            r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD, measure_time=False))
            assert r.verdict == "pass" and "retried" in r.facts, (r.category, r.reason)
        else:
            with pytest.raises(HarnessError, match="no candidate process alive"):
                sup.evaluate(EvalRequest(problem=PID, candidate=GOOD, measure_time=False))
    finally:
        sup.close()


def test_a_set_opened_ahead_that_finds_no_memory_is_dropped_and_the_next_evaluation_opens_its_own(cache_dir, monkeypatch):
    """At an evaluation's end the next baseline set is opened ahead, while the candidate just killed may still hold
    what it took: an out-of-memory there drops that set (an optimisation), it never escapes the evaluation."""
    sup = Supervisor(device="cpu", cache_dir=cache_dir, fresh_baselines=True, limits={"spawn_s": 30})
    real_open, refused = sup.baselines._open, []

    def _open(st, layout, owner, wait=True):
        if owner == sup.baselines.AHEAD and not refused:
            refused.append(1)
            raise torch.OutOfMemoryError("lending 1.0 GiB: out of memory")
        return real_open(st, layout, owner, wait=wait)
    monkeypatch.setattr(sup.baselines, "_open", _open)
    try:
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
        assert refused and r.verdict == "pass", (r.category, r.reason, r.error)
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
        assert r.verdict == "pass" and not r.facts["baseline_setup"].get("opened_ahead"), r.facts["baseline_setup"]
    finally:
        sup.close()


def test_the_evaluation_holds_no_official_pair_between_uses(cache_dir, monkeypatch):
    """The plan counts one input set in flight beside the reference cache. Stop 42 (an H100, 47 at full size): the
    evaluation held its official pair from start to end outside a cache too small for it, and with a redraw beside
    it the supervisor ran out of memory. Now it keeps only the pair's shapes (meta tensors) and draws the official
    inputs again from their seed where the cache has not kept them: the same values."""
    from kbenv.sandbox import evaluation as E
    sup = Supervisor(device="cpu", cache_dir=cache_dir, limits={"spawn_s": 30})
    real_fit, seen = sup.refs.fit, []
    monkeypatch.setattr(sup.refs, "fit", lambda budget, keep: real_fit(0, keep))  # a cache that keeps nothing
    real_run = E.Evaluation.run

    def run(self):
        seen.append(self)
        return real_run(self)
    monkeypatch.setattr(E.Evaluation, "run", run)
    try:
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
        assert r.verdict == "pass", r.reason
        ev = seen[-1]
        assert not hasattr(ev, "official")
        assert all(x.device.type == "meta" for side in ev.official_spec for x in side if isinstance(x, torch.Tensor))
        assert sup.refs.cached(ev.st, ev.official_seed, "default") is None  # nothing else keeps it either
        again = ev.official_inputs()
        drawn = sup.refs.inputs(ev.st, ev.official_seed, "default")
        assert all(torch.equal(a, b) for a, b in zip(again, drawn) if isinstance(a, torch.Tensor))
        assert [tuple(x.shape) for x in again if isinstance(x, torch.Tensor)] == \
            [tuple(x.shape) for x in ev.official_spec[0] if isinstance(x, torch.Tensor)]
    finally:
        sup.close()


def test_a_parked_decoy_is_killed_with_the_candidate_and_its_memory_counted_as_the_candidates():
    """A decoy run that ended is held through the timing phase (``Evaluation.park``): it ran the candidate's code,
    so an out-of-memory then kills it with the candidate's executor, after the free memory is first read, and
    what it gave back is the candidate's."""
    proc, err, order = _Proc(), torch.OutOfMemoryError("CUDA out of memory"), []
    reads = iter([0, 8 * GiB])

    def free():
        order.append("read")
        return next(reads)
    sup = _sup([])
    sup.free_device_bytes = free
    sup.pool = NS(join=lambda: order.append("join"),
                  dispose=lambda p, lease, start_spares: order.append(("dispose", p, lease, start_spares)))
    f = oom_verdict(sup, proc, err, [], others=[("decoy", "its lease")])
    assert f.category == "oom" and proc.killed
    assert order == ["read", ("dispose", "decoy", "its lease", False), "join", "read"], order

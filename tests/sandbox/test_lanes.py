"""Lanes (``kbenv.sandbox.lanes``): supervisors sharing a GPU. Two ``Lanes`` objects over one lock directory stand
for two lane processes (each has its own file descriptors, and ``flock`` arbitrates between descriptors as between
processes). What must hold: a timing phase never shares the GPU with another lane's evaluation or with a lane's
dying process; judging alone waits for every other lane's candidates and is not starved by their next evaluations;
a lane that is not quiet cannot start timing or judging alone; and which results are judged again alone."""

from __future__ import annotations

import contextlib
import threading
import time
from types import SimpleNamespace as NS

import pytest

from kbenv.sandbox.lanes import Lanes, sharing_could_cause

WAIT = 5.0  # seconds a thread that must get through is given
BLOCKED = 0.4  # seconds a thread that must wait is watched for


def _until(cond, limit: float = WAIT) -> bool:
    """Poll ``cond()`` until it holds (True) or ``limit`` seconds have passed (False)."""
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _pair(tmp_path):
    return Lanes("test-gpu", 2, directory=tmp_path), Lanes("test-gpu", 2, directory=tmp_path)


def _in_thread(fn) -> tuple[threading.Thread, threading.Event, threading.Event]:
    """Run ``fn(entered, leave)`` in a thread: it sets ``entered`` once it holds what it asked for, and holds it
    until ``leave`` is set."""
    entered, leave = threading.Event(), threading.Event()
    t = threading.Thread(target=fn, args=(entered, leave), daemon=True)
    t.start()
    return t, entered, leave


def _holding(enter):
    """A thread body that holds ``enter()`` (a context manager) from ``entered`` until ``leave``."""
    def fn(entered, leave):
        with enter():
            entered.set()
            leave.wait(WAIT * 4)
    return fn


def _evaluating(lane):
    return _holding(lane.evaluation)


@contextlib.contextmanager
def _timed(lane):
    with lane.evaluation(), lane.timing():
        yield


def _timing(lane):
    return _holding(lambda: _timed(lane))


def _alone(lane):
    return _holding(lane.alone)


def test_two_lanes_evaluate_side_by_side(tmp_path):
    a, b = _pair(tmp_path)
    ta, ina, outa = _in_thread(_evaluating(a))
    tb, inb, outb = _in_thread(_evaluating(b))
    assert ina.wait(WAIT) and inb.wait(WAIT)  # both hold the GPU shared at once
    assert a.held() == {"turnstile": 0, "candidates": 1, "gpu_turn": 0, "gpu": 1}
    outa.set(), outb.set()
    ta.join(WAIT), tb.join(WAIT)
    assert a.held() == {"turnstile": 0, "candidates": 0, "gpu_turn": 0, "gpu": 0}


def test_a_timing_phase_waits_for_the_other_lanes_evaluation_and_then_has_the_gpu_alone(tmp_path):
    a, b = _pair(tmp_path)
    tb, inb, outb = _in_thread(_evaluating(b))
    assert inb.wait(WAIT)
    ta, ina, outa = _in_thread(_timing(a))
    assert not ina.wait(BLOCKED)  # b's evaluation holds the GPU shared: a's timing waits
    outb.set()
    assert ina.wait(WAIT)  # b is done: a times
    assert a.held()["gpu"] == "exclusive"
    tc, inc, outc = _in_thread(_evaluating(b))
    assert not inc.wait(BLOCKED)  # while a times, b's next evaluation does not start
    outa.set()
    assert inc.wait(WAIT)
    outc.set()
    for t in (ta, tb, tc):
        t.join(WAIT)


def test_a_dying_process_of_one_lane_keeps_the_others_timing_waiting_until_it_is_gone(tmp_path):
    a, b = _pair(tmp_path)
    with b.evaluation():
        hold = b.hold(gpu=True, candidates=True)  # a reaper's: the process may still run kernels
    assert b.held() == {"turnstile": 0, "candidates": 1, "gpu_turn": 0, "gpu": 1}
    ta, ina, outa = _in_thread(_timing(a))
    assert not ina.wait(BLOCKED)
    hold.release()  # the process is gone
    assert ina.wait(WAIT)
    outa.set()
    ta.join(WAIT)


def test_a_lane_that_is_not_quiet_may_not_start_timing_or_judge_alone(tmp_path):
    a, _ = _pair(tmp_path)
    with a.evaluation():
        hold = a.hold(gpu=True)  # a process of its own still being reaped
        with pytest.raises(RuntimeError, match="quiet"):
            with a.timing():
                pass
        hold.release()
        with pytest.raises(RuntimeError, match="quiet"):
            with a.alone():
                pass
        with a.timing():  # quiet now
            assert a.held()["gpu"] == "exclusive"
        assert a.held()["gpu"] == 1


def test_judging_alone_waits_for_every_other_candidate_and_is_not_starved(tmp_path):
    a, b = _pair(tmp_path)
    tb, inb, outb = _in_thread(_evaluating(b))
    assert inb.wait(WAIT)
    ta, ina, outa = _in_thread(_alone(a))
    assert not ina.wait(BLOCKED)  # b has a candidate alive
    tc, inc, outc = _in_thread(_evaluating(b))  # b's next evaluation, queued behind the lane judging alone
    outb.set()
    assert ina.wait(WAIT)  # a is alone: b's next did not slip in before it
    assert not inc.wait(BLOCKED)
    assert a.held() == {"turnstile": "exclusive", "candidates": "exclusive", "gpu_turn": 0, "gpu": "exclusive"}
    with a.evaluation():  # the lane's own holds inside are counted only (its reapers never wait on itself)
        with a.timing():
            pass
    a.hold(gpu=True, candidates=True).release()
    outa.set()
    ta.join(WAIT)
    assert inc.wait(WAIT)
    outc.set()
    tc.join(WAIT), tb.join(WAIT)


def test_a_waiting_timing_phase_is_not_starved_by_the_other_lanes_evaluations_that_follow_each_other(tmp_path):
    """The H200's first two-lane rollout: one lane's timing phase waited 100 s while the other lane's evaluations
    followed each other, each one's shared hold taken before the last one's reapers let go. The next evaluation
    now waits behind the timing phase's turn."""
    a, b = _pair(tmp_path)
    with b.evaluation():
        reaper = b.hold(gpu=True, candidates=True)  # b's last evaluation's process, still dying
    ta, ina, outa = _in_thread(_timing(a))
    assert not ina.wait(BLOCKED)  # a waits for b's dying process
    tb, inb, outb = _in_thread(_evaluating(b))  # b's next evaluation: not before a has timed
    assert not inb.wait(BLOCKED)
    reaper.release()
    assert ina.wait(WAIT) and not inb.wait(BLOCKED)
    outa.set()
    assert inb.wait(WAIT)
    outb.set()
    ta.join(WAIT), tb.join(WAIT)


def test_a_lane_that_judged_alone_keeps_only_its_reapers_holds_after(tmp_path):
    a, b = _pair(tmp_path)
    with a.alone():
        hold = a.hold(gpu=True, candidates=True)  # a process disposed of during the run, still dying after it
    assert a.held() == {"turnstile": 0, "candidates": 1, "gpu_turn": 0, "gpu": 1}
    tb, inb, outb = _in_thread(_timing(b))
    assert not inb.wait(BLOCKED)
    hold.release()
    assert inb.wait(WAIT)
    outb.set()
    tb.join(WAIT)


def _res(verdict="fail", category=None, reason="", error="", decoy=None):
    return NS(verdict=verdict, category=category, reason=reason, error=error, facts={"decoy": decoy} if decoy else {})


def _timing_then(lane, settle, after):
    """A thread body: an evaluation whose timing block (``settle`` at its end) is entered, held until ``leave``,
    then left; ``after`` is set once the block has been left (the GPU shared again), and the evaluation goes on
    until ``done`` (an attribute of the body) is set."""
    done = threading.Event()

    def fn(entered, leave):
        with lane.evaluation():
            with lane.timing(settle=settle):
                entered.set()
                leave.wait(WAIT * 4)
            after.set()
            done.wait(WAIT * 4)
    fn.done = done
    return fn


def _shares_then_times(lane):
    """A thread body: an evaluation that shares the GPU (``shares`` set), and goes to time once ``goes`` is set
    (both attributes of the body)."""
    shares, goes = threading.Event(), threading.Event()

    def fn(entered, leave):
        with lane.evaluation():
            shares.set()
            goes.wait(WAIT * 4)
            with lane.timing():
                entered.set()
                leave.wait(WAIT * 4)
    fn.shares, fn.goes = shares, goes
    return fn


def test_a_timing_phase_passes_the_gpu_straight_to_a_lane_waiting_to_time(tmp_path):
    """Three lanes: a times, b waits to time, c's evaluation gave way (holds nothing of the GPU). At the end of a's
    block the GPU goes to b at once, though a's evaluation goes on; a takes it back shared only after b's block,
    and c's next shared hold waits behind b too."""
    a, b, c = (Lanes("test-gpu", 3, directory=tmp_path) for _ in range(3))
    after_a = threading.Event()
    b_body = _shares_then_times(b)
    tb, inb, outb = _in_thread(b_body)
    assert b_body.shares.wait(WAIT)  # b's evaluation shares the GPU
    body = _timing_then(a, lambda: True, after_a)
    ta, ina, outa = _in_thread(body)
    assert not ina.wait(BLOCKED)  # a waits for b's shared hold
    assert _until(b.wanted)  # a holds the turn (under load a's thread can take longer than BLOCKED to get there)
    b_body.goes.set()  # b goes to time too: behind a, which holds the turn
    assert ina.wait(WAIT) and not inb.wait(BLOCKED)  # a times, b waits
    assert c.wanted() and not a.wanted()  # b waits for its turn (a, timing, never gives way)
    tc, inc, outc = _in_thread(_evaluating(c))
    outa.set()  # a's block ends, its evaluation does not
    assert inb.wait(WAIT)  # b times before a's evaluation ends: passed on
    assert b.held()["gpu"] == "exclusive"
    assert not after_a.wait(BLOCKED) and not inc.wait(BLOCKED)  # a and c wait behind b's block
    assert a.passed_on == 1  # (a's held() would wait: its way back holds the lane's mutex while it waits)
    outb.set()
    assert after_a.wait(WAIT) and inc.wait(WAIT)  # both share the GPU again
    assert a.held()["gpu"] == 1 and a.facts()["passed_on"] == 1 and a.facts()["passed_on_s"] > BLOCKED
    assert b.passed_on == 0  # nobody waited for b's turn
    body.done.set(), outc.set()
    for t in (ta, tb, tc):
        t.join(WAIT)
    assert a.held() == {"turnstile": 0, "candidates": 0, "gpu_turn": 0, "gpu": 0}


@pytest.mark.parametrize("how", ["no_settle", "not_quiet", "raised"])
def test_a_timing_phase_passes_nothing_on_unless_it_ended_quiet(tmp_path, how):
    """Without ``settle``, with a ``settle`` that says the lane is not quiet, or after a block that raised, the lane
    keeps the GPU shared at its block's end, and the lane waiting to time waits for its evaluation (or for it to
    give way) as before."""
    a, b = _pair(tmp_path)
    settle = {"no_settle": None, "not_quiet": lambda: False, "raised": lambda: True}[how]
    after_a, done = threading.Event(), threading.Event()

    def body(entered, leave):
        with a.evaluation():
            try:
                with a.timing(settle=settle):
                    entered.set()
                    leave.wait(WAIT * 4)
                    if how == "raised":
                        raise ValueError("the candidate's block failed")
            except ValueError:
                pass
            after_a.set()
            done.wait(WAIT * 4)
    b_body = _shares_then_times(b)
    tb, inb, outb = _in_thread(b_body)
    assert b_body.shares.wait(WAIT)
    ta, ina, outa = _in_thread(body)
    # b goes to time only once a holds the turn: sooner, b could take it first and time before a (a race CI lost once)
    assert _until(b.wanted)
    b_body.goes.set()
    assert ina.wait(WAIT) and not inb.wait(BLOCKED) and b.wanted() is False and a.wanted() is False
    outa.set()
    assert after_a.wait(WAIT)  # a shares the GPU again at once
    assert a.held()["gpu"] == 1 and a.passed_on == 0
    assert not inb.wait(BLOCKED)  # b waits for a's evaluation
    done.set()
    assert inb.wait(WAIT)
    outb.set()
    ta.join(WAIT), tb.join(WAIT)


def test_a_timing_phase_with_nobody_waiting_keeps_the_gpu_shared_without_settling(tmp_path):
    a, _ = _pair(tmp_path)
    settled = []
    with a.evaluation():
        with a.timing(settle=lambda: settled.append(1) or True):
            pass
        assert a.held()["gpu"] == 1 and a.passed_on == 0 and not settled


def test_which_results_are_judged_again_alone():
    assert not sharing_could_cause(_res("pass"))
    for category in ("oom", "timeout", "crash", "nondeterministic"):
        assert sharing_could_cause(_res(category=category))
    assert sharing_could_cause(_res(category="compile", error="torch.OutOfMemoryError: CUDA out of memory."))
    assert sharing_could_cause(_res(category="decoy", decoy={"noop_failure": "oom"}))
    # wrong values, a wrong shape, a compile error, a decoy whose no-op output was simply right: they stand
    for category in ("inaccurate", "shape", "compile", "mutation", "distribution"):
        assert not sharing_could_cause(_res(category=category, reason="max error 3.1"))
    assert not sharing_could_cause(_res(category="decoy", decoy={"noop_correct": True}))


def test_two_lanes_need_two_supervisors():
    with pytest.raises(ValueError, match="at least two"):
        Lanes("x", 1)


def test_the_lock_files_live_where_no_sandbox_reaches():
    from kbenv.sandbox import process
    from kbenv.sandbox.lanes import lock_dir
    d = lock_dir("GPU-1234/../x")
    assert d.parent.as_posix() in [h.rstrip("/") for h in process.HIDDEN] and ".." not in d.name
    assert (d.stat().st_mode & 0o777) == 0o700


def test_a_lane_passes_an_honest_kernel_and_judges_a_timeout_again_alone(cache_dir, tmp_path):
    """A supervisor as one of two lanes (on the CPU: the same locks, no GPU): an honest ReLU passes on its shared
    run; a candidate that hangs in correctness times out (a verdict the sharing could have caused: the GPU and the
    cores shared), so it is judged again alone, and that judgment is the result; the lane holds nothing after."""
    import uuid

    from kbenv.sandbox.result import EvalRequest
    from kbenv.sandbox.supervisor import Supervisor
    from test_faults import GOOD, PID, with_forward
    sup = Supervisor(device="cpu", cache_dir=cache_dir, lanes=2, lane_key=f"test-{uuid.uuid4().hex[:8]}",
                     limits={"compile_s": 30, "spawn_s": 30, "trial_s": 4, "timing_s": 60})
    try:
        good = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD, size="small"))
        assert good.verdict == "pass", (good.category, good.reason, good.error)
        assert good.facts["lanes"] == {"lanes": 2, "alone": False, "passed_on": 0, "passed_on_s": 0.0,
                                       "gave_way": 0, "gave_way_s": 0.0, "given_up": 0, "split_s": {},
                                       "unparked": {}, "not_quiet": {}}
        hang = sup.evaluate(EvalRequest(problem=PID, candidate=with_forward("while True: pass\n"), size="small"))
        assert hang.category == "timeout", (hang.category, hang.reason)
        assert hang.facts["lanes"]["alone"] is True and "timeout" in hang.facts["lanes"]["shared_result"]
        assert sup.lanes.alone_runs == 1
        sup.pool.join()
        sup.baselines.join()
        assert sup.lanes.held() == {"turnstile": 0, "candidates": 0, "gpu_turn": 0, "gpu": 0}
    finally:
        sup.close()


def test_what_a_sibling_could_have_caused_is_decided_by_the_run_alone(cache_dir, monkeypatch):
    """A sibling lane's candidate takes memory or time, and this lane's honest candidate fails its shared run for it
    (simulated: the shared run reports ``oom``, as the trusted side or the candidate's own allocation would). The
    result that counts is the run alone, where the honest kernel passes; the shared run is kept as a fact. A wrong
    answer is not judged again: only what sharing could cause is."""
    import uuid

    from kbenv.sandbox import supervisor as S
    from kbenv.sandbox.result import EvalRequest
    from test_faults import GOOD, PID, with_forward
    sup = S.Supervisor(device="cpu", cache_dir=cache_dir, lanes=2, lane_key=f"test-{uuid.uuid4().hex[:8]}",
                       limits={"compile_s": 30, "spawn_s": 30, "trial_s": 20, "timing_s": 60})
    real, runs = S.Supervisor._evaluate, []

    def evaluate(self, req):
        alone = self.lanes.held()["gpu"] == "exclusive"
        runs.append(alone)
        res = real(self, req)
        if not alone and req.candidate == GOOD:  # the sibling's doing, in the shared run only
            res.verdict, res.category, res.reason = "fail", "oom", "out of memory while the candidate's executor was alive"
        return res
    monkeypatch.setattr(S.Supervisor, "_evaluate", evaluate)
    try:
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD, size="small"))
        assert runs == [False, True] and r.verdict == "pass", (r.category, r.reason)
        assert r.facts["lanes"]["alone"] is True and "oom" in r.facts["lanes"]["shared_result"]
        wrong = sup.evaluate(EvalRequest(problem=PID, candidate=with_forward("return x * 0\n"), size="small"))
        assert runs[2:] == [False] and wrong.verdict == "fail" and wrong.facts["lanes"]["alone"] is False
    finally:
        sup.close()


@pytest.mark.parametrize("order", ["alone", "old_order"])
def test_a_first_baseline_warm_up_waits_for_the_gpu_alone_and_only_then_marks_the_set_built(tmp_path, monkeypatch,
                                                                                             order):
    """A problem's first baseline warm-up autotunes torch.compile, and the marker it leaves lets later warm-ups run
    beside other work. Under lanes it runs inside the timing phase's exclusive hold, and leaves the marker. Run
    the old way (before the exclusive hold, beside whatever the other lanes do), it leaves no marker."""
    import uuid

    from kbenv.sandbox import baselines as B
    from kbenv.sandbox.result import EvalRequest
    from kbenv.sandbox.supervisor import Supervisor
    from test_faults import GOOD, PID
    held, real = [], B.BaselineExecutors.leases

    def leases(self, st, layout, *a, **k):
        if not self._warm:  # a warm-up: where it runs
            held.append(self.sup.lanes.held()["gpu"])
        return real(self, st, layout, *a, **k)
    monkeypatch.setattr(B.BaselineExecutors, "leases", leases)
    if order == "old_order":
        monkeypatch.setattr(B.BaselineExecutors, "autotunes", lambda self, *a, **k: False)
    sup = Supervisor(device="cpu", cache_dir=tmp_path, lanes=2, lane_key=f"test-{uuid.uuid4().hex[:8]}",
                     limits={"compile_s": 30, "spawn_s": 30, "trial_s": 10, "timing_s": 60})
    try:
        res = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD, size="small"))
        assert res.verdict == "pass", (res.category, res.reason, res.error)
        built = tmp_path / "baselines" / "built"
        markers = list(built.glob("*")) if built.exists() else []
        if order == "alone":
            assert held == ["exclusive"] and res.facts.get("baseline_warmup_alone") is True
            assert len(markers) == 1
        else:
            assert held == [1] and "baseline_warmup_alone" not in res.facts
            assert markers == []
    finally:
        sup.close()

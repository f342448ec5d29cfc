"""Giving way (``kbenv.sandbox.preempt``): a lane lets another lane's timing phase have the GPU at its threads'
checkpoints instead of at its evaluation's end. What must hold: while the other lane times, every registered thread
of the giving lane is parked and its processes are quiet (``quiet()`` ran and its resume has not); a thread that
does not reach a checkpoint keeps the GPU as before (the attempt is given up, never forced); a lane that cannot be
made quiet keeps it too; a thread waiting on another thread of the lane counts as parked; and on two CPU
supervisors sharing a device, the waiting lane's timing phase starts long before the other's evaluation ends, and
both honest candidates pass."""

from __future__ import annotations

import threading
import time

import pytest

from kbenv.sandbox.lanes import Lanes
from kbenv.sandbox.preempt import Yielder

WAIT = 5.0


def _lanes(tmp_path):
    return Lanes("test-gpu", 2, directory=tmp_path), Lanes("test-gpu", 2, directory=tmp_path)


class _Quiet:
    """A stand-in for ``quiet_lane``: records when the lane was quiet, and can refuse."""

    def __init__(self, fail: bool = False):
        self.fail, self.quiet, self.spans = fail, False, []

    def __call__(self):
        if self.fail:
            raise RuntimeError("a candidate's process could not be held")
        self.quiet, t0 = True, time.monotonic()

        def resume():
            self.quiet = False
            self.spans.append((t0, time.monotonic()))
        return resume


def _timer(lane, log):
    """The other lane: an evaluation whose timing phase logs when it has the GPU and checks what it finds."""
    def run(entered):
        with lane.evaluation():
            entered.set()
            with lane.timing():
                log.append(("timing", time.monotonic()))
                time.sleep(0.3)
                log.append(("timed", time.monotonic()))
    return run


def _thread(fn, *args):
    t = threading.Thread(target=fn, args=args, daemon=True)
    t.start()
    return t


def test_a_lane_gives_way_at_a_checkpoint_and_goes_on_after_the_others_timing(tmp_path):
    a, b = _lanes(tmp_path)
    quiet = _Quiet()
    y = Yielder(b, quiet, park_s=2.0)
    log, stop = [], threading.Event()
    in_b = threading.Event()
    seen_while_timing = []

    def b_work():  # b's evaluation: work between checkpoints until told to stop
        with b.evaluation(), y.working():
            in_b.set()
            while not stop.is_set():
                y.checkpoint()
                log.append(("b_work", time.monotonic()))
                time.sleep(0.01)
    tb = _thread(b_work)
    assert in_b.wait(WAIT)
    entered = threading.Event()
    ta = _thread(_timer(a, log), entered)
    deadline = time.monotonic() + WAIT
    while not any(e == "timed" for e, _ in log) and time.monotonic() < deadline:
        if any(e == "timing" for e, _ in log) and not any(e == "timed" for e, _ in log):
            seen_while_timing.append(quiet.quiet)
        time.sleep(0.02)
    ta.join(WAIT)
    assert not ta.is_alive() and any(e == "timed" for e, _ in log), "the waiting lane never timed"
    t_on = next(t for e, t in log if e == "timing")
    t_off = next(t for e, t in log if e == "timed")
    # b did nothing while a timed, and was quiet the whole time
    assert not [t for e, t in log if e == "b_work" and t_on < t < t_off]
    assert seen_while_timing and all(seen_while_timing)
    assert y.gave_way == 1 and quiet.spans and quiet.spans[0][1] >= t_off
    deadline = time.monotonic() + WAIT  # (polled: a loaded CI machine may take more than 0.1 s to resume it)
    while not [t for e, t in log if e == "b_work" and t > t_off] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [t for e, t in log if e == "b_work" and t > t_off], "b did not go on after the timing phase"
    assert b.held()["gpu"] == 1  # its evaluation's shared hold, taken again
    stop.set()
    tb.join(WAIT)
    y.close()


def test_a_thread_that_does_not_reach_a_checkpoint_keeps_the_gpu_until_its_evaluation_ends(tmp_path):
    a, b = _lanes(tmp_path)
    quiet = _Quiet()
    y = Yielder(b, quiet, park_s=0.3, retry_s=0.05)
    in_b, release = threading.Event(), threading.Event()

    def b_busy():  # a long step with no checkpoint (a compile, a long block)
        with b.evaluation(), y.working():
            in_b.set()
            y.checkpoint("long_step")
            release.wait(WAIT)
    tb = _thread(b_busy)
    assert in_b.wait(WAIT)
    log, entered = [], threading.Event()
    ta = _thread(_timer(a, log), entered)
    time.sleep(1.0)
    assert not log and y.gave_way == 0 and y.given_up >= 1 and not quiet.spans  # never forced
    # where the thread that did not park was, by the last checkpoint it passed: once per attempt given up
    unparked = y.facts()["unparked"]  # (the watcher goes on retrying meanwhile)
    assert set(unparked) == {"long_step"} and unparked["long_step"] >= 1, (unparked, y.last_error)
    assert len(y._where) == 1
    release.set()
    tb.join(WAIT)
    ta.join(WAIT)
    assert [e for e, _ in log] == ["timing", "timed"]
    assert not y._where  # a thread that has left keeps no entry (a decoy thread per evaluation)
    y.close()


def test_a_lane_past_its_last_checkpoint_makes_no_attempt(tmp_path):
    """After ``timing_setup`` a thread reaches no checkpoint before its lane times or its evaluation ends: no
    attempt is made (one could only fail, and hold the thread at its work's end while it lasted); the other lane
    times once this one lets the GPU go."""
    a, b = _lanes(tmp_path)
    quiet = _Quiet()
    y = Yielder(b, quiet, park_s=0.3, retry_s=0.05)
    in_b, release = threading.Event(), threading.Event()

    def b_setup():
        with b.evaluation(), y.working():
            y.checkpoint("timing_setup")
            in_b.set()
            release.wait(WAIT)
    tb = _thread(b_setup)
    assert in_b.wait(WAIT)
    log, entered = [], threading.Event()
    ta = _thread(_timer(a, log), entered)
    time.sleep(1.0)
    assert not log and y.given_up == 0 and y.gave_way == 0 and not y.facts()["unparked"], (y.facts(), y.last_error)
    t_release = time.monotonic()
    release.set()
    tb.join(WAIT)
    ta.join(WAIT)
    assert [e for e, _ in log] == ["timing", "timed"] and log[0][1] - t_release < 0.2  # no attempt held b's end
    y.close()


def test_every_registered_thread_must_park_itself(tmp_path):
    """Parking is counted per thread: a thread idle twice over (one wait inside another) does not stand in for a
    registered thread still at work, so the attempt is given up, never forced on the working thread."""
    a, b = _lanes(tmp_path)
    quiet = _Quiet()
    y = Yielder(b, quiet, park_s=0.3, retry_s=0.05)
    ready, release = threading.Barrier(3), threading.Event()

    def idle_twice():
        with b.evaluation(), y.working(), y.idle(), y.idle():
            ready.wait(WAIT)
            release.wait(WAIT)

    def busy():
        with y.working():
            y.checkpoint("busy_step")
            ready.wait(WAIT)
            release.wait(WAIT)
    t1, t2 = _thread(idle_twice), _thread(busy)
    ready.wait(WAIT)
    assert y.give_way() is False and not quiet.spans, y.last_error
    assert y.facts()["unparked"] == {"busy_step": 1}
    release.set()
    t1.join(WAIT)
    t2.join(WAIT)
    y.close()


def test_the_lane_waits_ahead_while_its_threads_park(tmp_path):
    """What quiet() waits for first (dying processes, spares' contexts) is waited for while the threads park, not
    after: a thread that parks 0.6 s after the request and an ahead that takes 0.6 s hand over in about 0.6 s, not
    1.2. ``ahead`` runs before the thread has parked, and quiet() still runs once it has (``ahead`` decides
    nothing); an ahead that raises is only a lost head start."""
    for fail in (False, True):
        (tmp_path / str(fail)).mkdir()
        a, b = _lanes(tmp_path / str(fail))
        quiet = _Quiet()
        marks = {}

        def ahead(until):
            marks["ahead_start"] = time.monotonic()
            assert until > marks["ahead_start"]
            time.sleep(0.6)
            marks["ahead_end"] = time.monotonic()
            if fail:
                raise RuntimeError("a spare's socket went away")
        y = Yielder(b, quiet, park_s=3.0, ahead=ahead)
        in_b, stop = threading.Event(), threading.Event()

        ends = []

        def b_work():  # steps of 0.6 s between checkpoints
            with b.evaluation(), y.working():
                in_b.set()
                while not stop.is_set():
                    y.checkpoint()
                    time.sleep(0.6)
                    ends.append(time.monotonic())
        tb = _thread(b_work)
        assert in_b.wait(WAIT)
        log, entered = [], threading.Event()
        ta = _thread(_timer(a, log), entered)
        ta.join(WAIT)
        stop.set()
        tb.join(WAIT)
        y.close()
        assert [e for e, _ in log] == ["timing", "timed"] and y.gave_way >= 1, (log, y.last_error)
        parked = min(t for t in ends if t > marks["ahead_start"])  # the step's end the request came in
        assert quiet.spans and quiet.spans[0][0] >= parked, (quiet.spans, parked)  # quiet() once parked
        # from the request to quiet(): about 0.6 s (ahead and the park together), not 1.2 (one after the other)
        assert quiet.spans[0][0] - marks["ahead_start"] < 0.95, (quiet.spans, marks)
        split = y.facts()["split_s"]
        assert 0.55 <= split["ahead"] <= split["park"] < 1.1, split  # overlapped: about 0.6 s, not 1.2


def test_a_thread_waiting_for_the_other_threads_turn_with_transient_memory_counts_as_parked(cache_dir):
    """Correctness and the decoy beside it take turns with the supervisor's transient memory
    (``Supervisor.transient_turn``). A thread waiting for its turn has no GPU work of its own: it counts as parked,
    so the lane can give way while the other thread judges; a turn handed over while the lane gives way is parked
    on before it is used."""
    import uuid

    from kbenv.sandbox.supervisor import Supervisor
    sup = Supervisor(device="cpu", cache_dir=cache_dir, lanes=2, lane_key=f"test-{uuid.uuid4().hex[:8]}")
    try:
        y = sup.yielder
        holding, release, got = threading.Event(), threading.Event(), threading.Event()

        def holder():
            with sup.transient_turn():
                holding.set()
                release.wait(WAIT)

        def waiter():
            with sup.transient_turn():
                got.set()
        th = _thread(holder)
        assert holding.wait(WAIT)
        tw = _thread(waiter)
        deadline = time.monotonic() + WAIT
        while not y._parked_ids and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(y._parked_ids) == 1 and not got.is_set()  # the waiter: parked while it waits its turn
        release.set()
        th.join(WAIT)
        tw.join(WAIT)
        assert got.is_set() and not y._parked_ids and not sup.transient_lock.locked()
        with sup.transient_turn():  # uncontended: taken at once, nothing counted
            assert not y._parked_ids and sup.transient_lock.locked()
    finally:
        sup.close()


def test_a_thread_leaving_its_work_while_the_lane_gives_way_waits_until_it_has(tmp_path):
    """The evaluation's thread reaches its block's end (its evaluation then lets its holds go and starts spares)
    while the lane is about to give way: it waits there, parked, and leaves only after the other lane timed."""
    a, b = _lanes(tmp_path)
    y = Yielder(b, _Quiet(), park_s=2.0)
    in_b, log = threading.Event(), []

    def b_work():
        with b.evaluation():
            with y.working():
                in_b.set()
                time.sleep(0.5)  # work with no checkpoint, then the block's end
            log.append(("b_left", time.monotonic()))
    tb = _thread(b_work)
    assert in_b.wait(WAIT)
    ta = _thread(_timer(a, log), threading.Event())
    ta.join(WAIT)
    tb.join(WAIT)
    events = [e for e, _ in log]
    assert events == ["timing", "timed", "b_left"] and y.gave_way == 1, (events, y.last_error)
    assert b.held()["gpu"] == 0  # its evaluation's hold, taken again and then let go at its end
    y.close()


def test_a_lane_that_cannot_be_made_quiet_keeps_the_gpu(tmp_path):
    a, b = _lanes(tmp_path)
    y = Yielder(b, _Quiet(fail=True), park_s=0.5, retry_s=0.05)
    in_b, stop = threading.Event(), threading.Event()

    def b_work():
        with b.evaluation(), y.working():
            in_b.set()
            while not stop.is_set():
                y.checkpoint()
                time.sleep(0.01)
    tb = _thread(b_work)
    assert in_b.wait(WAIT)
    log, entered = [], threading.Event()
    ta = _thread(_timer(a, log), entered)
    time.sleep(0.6)
    assert not log and y.gave_way == 0 and "could not be held" in y.last_error
    nq = y.facts()["not_quiet"]  # (a fact; the watcher goes on retrying meanwhile)
    assert set(nq) == {"RuntimeError"} and nq["RuntimeError"] >= 1, nq
    stop.set()
    tb.join(WAIT)
    ta.join(WAIT)
    assert [e for e, _ in log] == ["timing", "timed"] and b.held()["gpu"] == 0
    y.close()


def test_a_thread_waiting_on_another_thread_of_the_lane_counts_as_parked(tmp_path):
    """The evaluation's thread waits for the decoy's (``Yielder.idle``) while the decoy's thread parks: the lane
    gives way; without ``idle`` neither would park and the attempt would be given up."""
    a, b = _lanes(tmp_path)
    y = Yielder(b, _Quiet(), park_s=2.0)
    side_done, in_b, stop = threading.Event(), threading.Event(), threading.Event()

    def side():
        with y.working():
            while not stop.is_set():
                y.checkpoint()
                time.sleep(0.01)
        side_done.set()

    def main():
        with b.evaluation(), y.working():
            _thread(side)
            in_b.set()
            with y.idle():
                side_done.wait(WAIT * 2)
    tb = _thread(main)
    assert in_b.wait(WAIT)
    log, entered = [], threading.Event()
    ta = _thread(_timer(a, log), entered)
    ta.join(WAIT)
    assert [e for e, _ in log] == ["timing", "timed"] and y.gave_way == 1
    stop.set()
    tb.join(WAIT)
    y.close()


def test_a_lane_does_not_give_way_to_its_own_timing_phase_or_while_a_process_of_it_is_dying(tmp_path):
    a, _ = _lanes(tmp_path)
    with a.evaluation():
        assert a.in_evaluation() and a.may_give_way() and not a.wanted()
        with a.timing():  # it waits for the GPU alone through gpu_turn: not another lane's wish
            assert not a.wanted() and not a.in_evaluation() and not a.may_give_way()
        assert a.may_give_way()
        h = a.hold(gpu=True)  # a dying process of the lane (a dying context may still run kernels)
        assert a.in_evaluation() and not a.may_give_way()
        with pytest.raises(RuntimeError):
            with a.giving_way():
                pass
        h.release()
    assert not a.in_evaluation()


def test_two_cpu_lanes_one_gives_way_to_the_others_timing_phase(cache_dir):
    """Two supervisors as lanes of one device (the CPU: the same locks and the same giving way). Lane b evaluates a
    candidate whose calls are slow (0.8 s each), so its evaluation lasts seconds; lane a evaluates an honest ReLU
    started just after. a's timing phase starts while b is still in correctness (b gives way at a checkpoint) and
    both pass."""
    import uuid

    from kbenv.sandbox.result import EvalRequest
    from kbenv.sandbox.supervisor import Supervisor
    from test_faults import GOOD, PID, with_forward
    key = f"test-{uuid.uuid4().hex[:8]}"
    limits = {"compile_s": 60, "spawn_s": 60, "trial_s": 60, "timing_s": 120}
    sa = Supervisor(device="cpu", cache_dir=cache_dir, lanes=2, lane_key=key, limits=limits)
    sb = Supervisor(device="cpu", cache_dir=cache_dir, lanes=2, lane_key=key, limits=limits)
    slow = with_forward("import time; time.sleep(0.8)\n")
    from kbenv.sandbox.process import proc_state
    quiet, seen = sb.yielder.quiet, []

    def watched_quiet():  # what the lane looks like once quiet_lane returned: every process of it stopped
        resume = quiet()
        procs = [*sb.pool.taken, *sb.baselines.started()]
        seen.append(sorted({proc_state(pid) for p in procs for pid in p.pids()}))
        return resume
    sb.yielder.quiet = watched_quiet
    try:
        out = {}
        tb = _thread(lambda: out.__setitem__("b", sb.evaluate(EvalRequest(problem=PID, candidate=slow, size="small"))))
        deadline = time.monotonic() + 60
        while not sb.pool.taken and time.monotonic() < deadline:  # b's candidate has its executor
            time.sleep(0.05)
        ra = sa.evaluate(EvalRequest(problem=PID, candidate=GOOD, size="small"))
        tb.join(120)
        rb = out["b"]
        assert ra.verdict == "pass", (ra.category, ra.reason, ra.error)
        assert rb.verdict == "pass", (rb.category, rb.reason, rb.error)
        assert rb.facts["lanes"]["alone"] is False and rb.facts["lanes"]["gave_way"] >= 1, (rb.facts["lanes"], sb.yielder.last_error)
        assert seen and all(states == ["T"] for states in seen), seen  # its candidate and baselines held
        # where b's giving way went, step by step: parking, each step of quiet_lane, and away for a's timing phase
        split = rb.facts["lanes"]["split_s"]
        assert {"ahead", "ahead_reaped", "ahead_starts", "park", "quiet", "reaped", "spares_settle", "spares_pause",
                "fence_holds", "away"} <= set(split), split
        assert split["ahead_reaped"] + split["ahead_starts"] <= split["ahead"] + 0.01, split  # its two parts
        assert split["away"] > 0 and split["quiet"] >= split["fence_holds"], split
        assert split["park"] >= split["ahead"], split  # waited ahead inside the park's time, never after it
        # a's wait for the GPU alone was shorter than b's correctness alone (about 5 s: six calls of 0.8 s), which
        # it would have waited out (b lets the GPU go only when it times, without giving way)
        assert ra.facts["timing_setup_s"]["lane_wait"] < rb.phase_seconds["correctness"] / 2, (
            ra.facts["timing_setup_s"], rb.phase_seconds)
    finally:
        sa.close()
        sb.close()


def test_giving_way_can_be_turned_off(cache_dir, monkeypatch):
    """``lane_preempt=False`` (or ``KBENV_LANE_PREEMPT=0``, for a deployment's every lane): no watcher, and every
    evaluation holds the GPU shared to its end, as before; ``KBENV_LANE_PREEMPT=checkpoints`` gives way only at
    checkpoints, not while a block of calls runs (stop 45's behaviour, for a measured comparison)."""
    import uuid

    from kbenv.sandbox.supervisor import Supervisor
    off = Supervisor(device="cpu", cache_dir=cache_dir, lanes=2, lane_key=f"test-{uuid.uuid4().hex[:8]}",
                     lane_preempt=False)
    monkeypatch.setenv("KBENV_LANE_PREEMPT", "0")
    env_off = Supervisor(device="cpu", cache_dir=cache_dir, lanes=2, lane_key=f"test-{uuid.uuid4().hex[:8]}")
    monkeypatch.delenv("KBENV_LANE_PREEMPT")
    on = Supervisor(device="cpu", cache_dir=cache_dir, lanes=2, lane_key=f"test-{uuid.uuid4().hex[:8]}")
    one = Supervisor(device="cpu", cache_dir=cache_dir)
    monkeypatch.setenv("KBENV_LANE_PREEMPT", "checkpoints")  # giving way, but not during a call (stop 45's)
    checkpoints = Supervisor(device="cpu", cache_dir=cache_dir, lanes=2, lane_key=f"test-{uuid.uuid4().hex[:8]}")
    monkeypatch.delenv("KBENV_LANE_PREEMPT")
    try:
        assert off.yielder is None and env_off.yielder is None and one.yielder is None
        assert on.yielder is not None and on.give_way_in_calls
        assert checkpoints.yielder is not None and not checkpoints.give_way_in_calls
        with checkpoints.waiting_for_calls():  # not idle: the yielder's parked count is unchanged
            assert not checkpoints.yielder._parked_ids
        with on.waiting_for_calls():
            assert len(on.yielder._parked_ids) == 1
    finally:
        for s in (off, env_off, on, one, checkpoints):
            s.close()


def _slow_b_then_a(cache_dir, b_candidate: str, a_after_s: float):
    """Two CPU lanes: lane b evaluates ``b_candidate``; ``a_after_s`` after b's executor is taken, lane a evaluates
    the known-good kernel. Returns a's result, b's, a's wall time, and the states of b's candidate's processes each
    time b made itself quiet to give way."""
    import uuid

    from kbenv.sandbox.process import proc_state
    from kbenv.sandbox.result import EvalRequest
    from kbenv.sandbox.supervisor import Supervisor
    from test_faults import GOOD, PID
    key = f"test-{uuid.uuid4().hex[:8]}"
    limits = {"compile_s": 60, "spawn_s": 60, "trial_s": 60, "timing_s": 120}
    sa = Supervisor(device="cpu", cache_dir=cache_dir, lanes=2, lane_key=key, limits=limits)
    sb = Supervisor(device="cpu", cache_dir=cache_dir, lanes=2, lane_key=key, limits=limits)
    quiet, seen = sb.yielder.quiet, []

    def watched_quiet():
        resume = quiet()
        seen.append(sorted({proc_state(pid) for p in sb.pool.taken for pid in p.pids()}))
        return resume
    sb.yielder.quiet = watched_quiet
    try:
        out = {}
        tb = _thread(lambda: out.__setitem__("b", sb.evaluate(EvalRequest(problem=PID, candidate=b_candidate,
                                                                         size="small"))))
        deadline = time.monotonic() + 60
        while not sb.pool.taken and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(a_after_s)
        t0 = time.monotonic()
        ra = sa.evaluate(EvalRequest(problem=PID, candidate=GOOD, size="small"))
        a_done = time.monotonic() - t0
        tb.join(120)
        rb = out["b"]
        assert ra.verdict == "pass", (ra.category, ra.reason, ra.error)
        assert rb.verdict == "pass", (rb.category, rb.reason, rb.error)
        assert rb.facts["lanes"]["gave_way"] >= 1, (rb.facts["lanes"], sb.yielder.last_error)
        return ra, rb, a_done, seen
    finally:
        sa.close()
        sb.close()


# True in b's own run, False in the supervisor's no-op rewrite of it (its kernel's store removed), which b's decoy phase
# runs once a has long finished: b's 12 s stand for a compile or a call of b's own, and waiting them out a second
# time in its decoy run checked nothing
_OWN_RUN = "'store' in relu_kernel.fn.__code__.co_names"


def test_a_lane_gives_way_while_its_candidate_compiles(cache_dir):
    """A compile can last long (an import that sleeps, an extension still building), and the thread that waits for
    it has no GPU work of its own: it counts as parked, so the lane gives way during it, holding the candidate's
    executor mid-import. Lane b's candidate sleeps 12 s at import; lane a, started once b's executor is taken, times
    long before b's compile ends. Both pass (b's import goes on where it stopped)."""
    from test_faults import GOOD
    slow_import = GOOD + f"if {_OWN_RUN}:\n    import time as _t\n    _t.sleep(12)\n"
    ra, rb, a_done, seen = _slow_b_then_a(cache_dir, slow_import, 0)
    assert seen and all(states == ["T"] for states in seen), seen  # b's candidate held, mid-import
    assert rb.phase_seconds["compile"] >= 12, rb.phase_seconds
    # a finished while b was still compiling: it did not wait b's compile out
    assert a_done < 10 and ra.facts["timing_setup_s"]["lane_wait"] < 4, (a_done, ra.facts["timing_setup_s"])


def test_a_lane_gives_way_while_its_candidate_runs_a_long_call(cache_dir):
    """A correctness block can last long (a first call's Triton compile on the GPU, a slow kernel), and the thread
    that waits for its reply has no GPU work of its own: it counts as parked, so the lane gives way during the call,
    holding the candidate's executor mid-call. Lane b's candidate sleeps 12 s in its first call; lane a, started
    once b's first call is under way, times long before that call ends. Both pass (b's call goes on where it
    stopped). With ``KBENV_LANE_PREEMPT=checkpoints`` (stop 45's behaviour) a's wait to time was 6.9 s."""
    from test_faults import with_forward
    slow_first = with_forward(f"if not getattr(ModelNew, '_warm', False) and {_OWN_RUN}:\n    ModelNew._warm = True\n"
                              "    import time as _t; _t.sleep(12)\n")
    ra, rb, a_done, seen = _slow_b_then_a(cache_dir, slow_first, 4)  # b's compile takes about 1 s here
    assert seen and all(states == ["T"] for states in seen), seen  # b's candidate held, mid-call
    assert rb.phase_seconds["correctness"] >= 12 and rb.phase_seconds["compile"] < 4, rb.phase_seconds
    # a finished while b's first call still slept: it did not wait that call out
    assert a_done < 10 and ra.facts["timing_setup_s"]["lane_wait"] < 4, (a_done, ra.facts["timing_setup_s"])


def test_the_references_phase_has_checkpoints_between_its_steps(supervisor, monkeypatch):
    """A problem's references (its model, the official pair, the precision contracts) are built at an evaluation's
    start, a second or more each for a problem not built before; a lane can give way only at a checkpoint, and the
    first used to come after them (taking the executor). Now one comes before each step."""
    from kbenv.sandbox.result import EvalRequest
    from test_faults import GOOD, PID
    where = []
    monkeypatch.setattr(supervisor, "checkpoint", lambda w="": where.append(w))
    r = supervisor.evaluate(EvalRequest(problem=PID, candidate=GOOD, measure_time=False))
    assert r.verdict == "pass", (r.category, r.reason, r.error)
    assert where[:5] == ["references"] * 4 + ["take_executor"], where

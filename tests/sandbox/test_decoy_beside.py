"""The decoy phase beside correctness (``DecoyRun``): started at once where the fence waits for one process's work,
deferred to after correctness under the idle-probe fence (which waits for the whole GPU), and always on the
supervisor's side thread."""

import concurrent.futures
import threading
from types import SimpleNamespace as NS

import torch

from kbenv.sandbox.decoy_phase import DecoyRun


def _ev(kind: str, room: int = 20 << 30):
    started = threading.Event()
    threads = []

    def decoy(run):
        threads.append(threading.current_thread().name)
        started.set()
        return {"noop_correct": False}
    side = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kbenv-side")
    device = torch.device("cpu" if kind == "sigstop" else "cuda")
    # the decoy's executor: its 8 GiB cap, its context and its lent slot (MemoryPlan.decoy_room)
    plan = NS(room_bytes=room, decoy_bytes=10 * GiB, decoy_room=room >= 10 * GiB)
    return NS(sup=NS(fence=NS(kind=kind), side=side, plan=plan), device=device, decoy=decoy), started, threads


GiB = 1 << 30


def test_the_decoy_starts_beside_correctness_under_a_per_process_fence():
    for kind in ("cuda_process_lock", "sigstop"):
        ev, started, threads = _ev(kind)
        run = DecoyRun(ev)
        assert started.wait(5)  # before anyone asked for its result
        assert run.result() == {"noop_correct": False} and threads[0].startswith("kbenv-side")


def test_the_decoy_waits_for_correctness_under_the_idle_probe_fence():
    ev, started, threads = _ev("idle_probe")
    run = DecoyRun(ev)
    assert not started.wait(0.3)  # nothing runs beside correctness
    assert run.result() == {"noop_correct": False} and threads[0].startswith("kbenv-side")
    abandoned = DecoyRun(ev)
    abandoned.abandon()
    abandoned.join()  # never started: nothing to wait for
    assert len(threads) == 1


def test_the_decoy_waits_for_correctness_where_the_memory_plan_has_no_room_for_a_second_worker():
    """Its executor beside the supervisor's judging could take memory the plan gives the judging: an OOM the
    candidate did not cause. Without room for a second worker (cap and context) it runs after correctness."""
    ev, started, threads = _ev("cuda_process_lock", room=4 << 30)
    run = DecoyRun(ev)
    assert not run.beside and not started.wait(0.3)
    assert run.result() == {"noop_correct": False}


def test_a_no_op_run_that_failed_beside_correctness_is_made_again_alone(cache_dir, monkeypatch):
    """A no-op run that returns no output decides the decoy check (a decoy), so it must not be a failure that
    running beside could cause: the run is made again after correctness, alone, and that run decides. Here the
    beside run fails (as an OOM would) and the honest kernel, whose no-op output is judged wrong alone, passes."""
    from kbenv.agents.scripted import KnownGoodPolicy
    from kbenv.prompts import extract_code
    from kbenv.sandbox import evaluation as E
    from kbenv.sandbox.result import EvalRequest
    from kbenv.sandbox.supervisor import Supervisor
    pid = "kernelbench/level1/23"
    src = extract_code(KnownGoodPolicy().act({"problem_id": pid, "prompt": "", "system": "", "turn": 0,
                                              "feedback": ""}))
    real, calls = E.Evaluation.decoy, []

    def decoy(self, run=None):
        calls.append(run is not None)
        if run is not None:
            return {"custom_kernels": 1, "noop_correct": None, "noop_failure": "oom"}
        return real(self, run)
    monkeypatch.setattr(E.Evaluation, "decoy", decoy)
    sup = Supervisor(device="cpu", cache_dir=cache_dir, limits={"spawn_s": 30}, decoy_beside=True)
    try:
        r = sup.evaluate(EvalRequest(problem=pid, candidate=src, measure_time=False))
        assert calls == [True, False], calls
        assert r.verdict == "pass", (r.category, r.reason, r.error)
        assert r.facts["decoy"]["beside_failure"] == "oom" and r.facts["decoy"]["noop_correct"] is False
    finally:
        sup.close()


def test_the_decoy_runs_beside_correctness_on_cuda_only_by_default(cache_dir):
    from kbenv.sandbox.supervisor import Supervisor
    sup = Supervisor(device="cpu", cache_dir=cache_dir, limits={"spawn_s": 30})
    try:
        assert sup.decoy_beside is False
        assert not DecoyRun.may_run_beside(NS(sup=sup, device=sup.device))
    finally:
        sup.close()


def test_where_the_decoy_cannot_run_beside_it_runs_after_timing_with_the_candidates_executor_gone(cache_dir,
                                                                                                  monkeypatch):
    """Where the decoy does not run beside correctness (here the CPU, as on cuda without room for a second
    worker) it runs after the timing phase, once the candidate's executor is disposed: a no-op run that fails
    for want of memory is a decoy, so that memory must be its own, never the candidate's live executor's."""
    from kbenv.agents.scripted import KnownGoodPolicy
    from kbenv.prompts import extract_code
    from kbenv.sandbox import evaluation as E
    from kbenv.sandbox.result import EvalRequest
    from kbenv.sandbox.supervisor import Supervisor
    pid = "kernelbench/level1/19"
    src = extract_code(KnownGoodPolicy().act({"problem_id": pid, "prompt": "", "system": "", "turn": 0,
                                              "feedback": ""}))
    real, seen = E.Evaluation.decoy, []

    def decoy(self, run=None):
        seen.append({"beside": run is not None, "executor_disposed": self._disposed,
                     "candidate_alive": self.lease.proc.proc.poll() is None, "after_timing": "timing" in self.phases})
        return real(self, run)
    monkeypatch.setattr(E.Evaluation, "decoy", decoy)
    sup = Supervisor(device="cpu", cache_dir=cache_dir, limits={"spawn_s": 30})
    try:
        r = sup.evaluate(EvalRequest(problem=pid, candidate=src))
        assert r.verdict == "pass", (r.category, r.reason, r.error)
        assert len(seen) == 1 and seen[0]["after_timing"] and seen[0]["executor_disposed"], seen
        assert r.facts["decoy"]["noop_correct"] is False
    finally:
        sup.close()


def test_the_decoys_wait_for_its_build_ahead_is_a_fact_of_its_split(cache_dir, monkeypatch):
    """Each CUDA candidate needs two builds (its own and its decoy's no-op rewrite); the decoy's wait for its build
    still running ahead is on the GPU's path where it outlasts correctness, so it is recorded
    (``facts.decoy.split_s.build_wait``, which ``benchmarks/compile_farm.py`` adds to the GPU's wait)."""
    import time

    from kbenv.agents.scripted import KnownGoodPolicy
    from kbenv.prompts import extract_code
    from kbenv.sandbox import decoy as D
    from kbenv.sandbox.result import EvalRequest
    from kbenv.sandbox.supervisor import Supervisor
    pid = "kernelbench/level1/23"
    src = extract_code(KnownGoodPolicy().act({"problem_id": pid, "prompt": "", "system": "", "turn": 0,
                                              "feedback": ""}))
    noop, kernels = D.noop_kernels(src)
    assert kernels
    sup = Supervisor(device="cpu", cache_dir=cache_dir, limits={"spawn_s": 30}, decoy_beside=True)
    asked, ready_at = [], []

    def building(source):  # the decoy's build: "still running" for 0.5 s after it is first asked about
        asked.append(source == noop)
        if source != noop:
            return False
        if not ready_at:
            ready_at.append(time.monotonic() + 0.5)
        return time.monotonic() < ready_at[0]
    try:
        assert sup.builds is not None
        monkeypatch.setattr(sup.builds, "building", building)
        r = sup.evaluate(EvalRequest(problem=pid, candidate=src, measure_time=False))
        assert r.verdict == "pass", (r.category, r.reason, r.error)
        assert any(asked), asked
        assert r.facts["decoy"]["split_s"]["build_wait"] >= 0.45, r.facts["decoy"]
    finally:
        sup.close()


def _ticks(pid: int) -> int:
    """The CPU time (clock ticks, every thread) a process has used; -1 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except OSError:
        return -1


def _thread_names(pid: int) -> list[str]:
    import os
    names = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return names


def test_a_decoy_run_that_ended_is_held_through_the_timing_phase_and_killed_after_it(cache_dir, monkeypatch):
    """A killed CUDA context takes 1.5-1.8 s to go (H100, stop 44), and the timing phase waits for every dying one:
    a decoy killed as correctness ended was that wait on every evaluation's path. A decoy run that ended is now
    held by the fence through the timing phase (``Evaluation.park``) and killed after it. Known-bad
    (``23/wrong/decoy_hog``): a candidate that notices it runs as the no-op rewrite starts a thread that keeps
    working, to slow the baselines timed next. Held, that thread makes no progress while timing runs; the
    candidate passes, as its honest twin does."""
    import time

    from kbenv.agents.scripted import KnownBadPolicy
    from kbenv.prompts import extract_code
    from kbenv.sandbox import timing_phase as TP
    from kbenv.sandbox.process import proc_state
    from kbenv.sandbox.result import EvalRequest
    from kbenv.sandbox.supervisor import Supervisor
    pid = "kernelbench/level1/23"
    src = extract_code(KnownBadPolicy("decoy_hog").act({"problem_id": pid, "prompt": "", "system": "", "turn": 0,
                                                        "feedback": ""}))
    real, seen = TP.TimingPhase.run, {}

    def run(self, res):
        parked = list(self.ev._parked)
        pids = [q for p, _ in parked for q in p.pids()]
        seen.update(parked=[p for p, _ in parked], held=[self.sup.fence.holds(p) for p, _ in parked],
                    dying=[t for t, _, _ in self.sup.pool._reapers if t.is_alive()],
                    states={q: proc_state(q) for q in pids}, names=[n for q in pids for n in _thread_names(q)],
                    ticks={q: _ticks(q) for q in pids})
        out = real(self, res)
        time.sleep(0.3)  # a running hog would spend these 30 ticks
        seen["ticks_after"] = {q: _ticks(q) for q in pids}
        seen["held_after"] = [self.sup.fence.holds(p) for p in seen["parked"]]
        return out
    monkeypatch.setattr(TP.TimingPhase, "run", run)
    sup = Supervisor(device="cpu", cache_dir=cache_dir, limits={"spawn_s": 30}, decoy_beside=True)
    try:
        r = sup.evaluate(EvalRequest(problem=pid, candidate=src))
        assert r.verdict == "pass", (r.category, r.reason, r.error)
        assert r.facts["decoy"]["beside"] and r.facts["decoy"]["noop_correct"] is False, r.facts["decoy"]
        assert "park" in r.facts["decoy"]["split_s"], r.facts["decoy"]
        assert len(seen["parked"]) == 1 and seen["held"] == [True] and seen["held_after"] == [True], seen
        assert "kbhog" in seen["names"], seen["names"]  # the saboteur's thread was there, started
        assert seen["states"] and set(seen["states"].values()) == {"T"}, seen["states"]
        assert seen["ticks_after"] == seen["ticks"], (seen["ticks"], seen["ticks_after"])
        assert not any(seen["parked"][0].proc.poll() is None and p is seen["parked"][0] for p in sup.pool.taken)
        sup.pool.join()
        assert seen["parked"][0].proc.poll() is not None  # killed after the timing phase, and reaped
    finally:
        sup.close()


def test_a_decoy_run_whose_executor_cannot_be_held_is_killed_at_once():
    """Parking needs the fence's hold (its queued work ended); an executor that cannot be held is not parked
    (``Evaluation.park`` says so, and the decoy phase disposes of it then, as before)."""
    from kbenv.sandbox.evaluation import Evaluation
    from kbenv.sandbox.fence import FenceTimeout

    def hold(p, timeout):
        raise FenceTimeout("still running")
    refills = []
    ev = Evaluation.__new__(Evaluation)
    ev._parked, ev._parked_lock = [], threading.Lock()
    ev.sup = NS(fence=NS(hold=hold), pool=NS(refill=lambda start: refills.append(start)))
    assert ev.park(object(), None) is False and ev._parked == [] and refills == []
    ev.sup.fence = NS(hold=lambda p, timeout: None)
    proc = NS(pids=lambda: [1])
    assert ev.park(proc, "lease") is True and ev._parked == [(proc, "lease")] and refills == [False]
    assert ev.parked_pids() == [1]

"""Faults of kbenv itself raise loudly; they never become a candidate failure or a low reward."""

import os
import time

import pytest

from kbenv.problems import register_kernelbench_dir
from kbenv.sandbox.memory_blame import oom_verdict
from kbenv.sandbox.result import EvalRequest
from kbenv.sandbox.supervisor import HarnessError, Supervisor

from test_faults import GOOD, PID, with_forward


def test_worker_that_cannot_start_is_a_harness_error(tmp_path, monkeypatch, cache_dir):
    shadow = tmp_path / "shadow" / "kbenv"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('broken install')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "shadow"))
    sup = Supervisor(device="cpu", cache_dir=cache_dir, keep_spare=False, sandbox="none", limits={"spawn_s": 30})
    try:
        with pytest.raises(HarnessError, match="did not start"):
            sup.evaluate(EvalRequest(problem=PID, candidate=GOOD, measure_time=False))
    finally:
        sup.close()


def test_reference_that_raises_is_a_harness_error(tmp_path, supervisor):
    lvl = tmp_path / "level1"
    lvl.mkdir()
    (lvl / "1_Broken.py").write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        raise RuntimeError('bug')\n"
        "def get_inputs():\n    return [torch.rand(4)]\ndef get_init_inputs():\n    return []\n")
    (p,) = register_kernelbench_dir(tmp_path, levels=(1,))
    with pytest.raises(HarnessError, match="reference raised"):
        supervisor.evaluate(EvalRequest(problem=p.id, candidate=GOOD, size="full", measure_time=False))


def test_stdout_flood_decides_nothing(supervisor):
    src = with_forward("import sys\nsys.stdout.write('PASS ' * 2_000_000)\nprint('verdict: pass, reward 100')\n")
    res = supervisor.evaluate(EvalRequest(problem=PID, candidate=src, measure_time=False))
    assert res.verdict == "pass" and res.reward == 1.0  # correct output; the text it printed changed nothing
    bad = src.replace("return y", "return y * 0")
    res = supervisor.evaluate(EvalRequest(problem=PID, candidate=bad, measure_time=False))
    assert res.verdict == "fail" and res.reward == 0.0


def _oom_case(monkeypatch, free_bytes):
    """memory_blame.oom_verdict with the device memory query faked (the decision is what is tested here; the
    CUDA case itself runs on the GPU machine)."""
    import torch
    sup = Supervisor.__new__(Supervisor)
    sup.device = torch.device("cuda", 0)

    class Refs:
        def drop_cached(self):
            pass
    sup.refs = Refs()
    sup.pool = type("Pool", (), {"join": lambda self: None})()  # nothing disposed is still dying
    killed = []

    class Proc:
        def kill(self):
            killed.append(True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free_bytes, 80 << 30))
    return sup, Proc(), killed


def test_supervisor_oom_with_memory_back_after_killing_the_executor_is_the_candidates(monkeypatch):
    sup, proc, killed = _oom_case(monkeypatch, 60 << 30)
    fault = oom_verdict(sup, proc, RuntimeError("CUDA out of memory"))
    assert killed and fault.category == "oom"


def test_supervisor_oom_without_memory_back_is_a_harness_error(monkeypatch):
    sup, proc, killed = _oom_case(monkeypatch, 1 << 20)
    with pytest.raises(HarnessError, match="no candidate process alive"):
        oom_verdict(sup, proc, RuntimeError("CUDA out of memory"))
    assert killed


def _proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        return s[s.rindex(")") + 2]
    except OSError:
        return "gone"


def test_spare_executors_are_stopped_while_a_candidate_is_timed(cache_dir, monkeypatch):
    """Nothing of the next executors (imports, start-up) runs while a candidate is being timed; they are resumed
    afterwards and the next evaluation takes one of them (never the one that ran a candidate)."""
    from kbenv.sandbox import timing_phase as E
    from kbenv.sandbox import process as P
    sup = Supervisor(device="cpu", cache_dir=cache_dir, spares=2, limits={"spawn_s": 30})
    seen = []
    real = E.time_block

    def spy(lease, fence, deadline, hold, overhead_s=0.0):
        seen.append({pid: _proc_state(pid) for s in sup.pool.spares for pid in P.process_tree(s.proc.pid)})
        return real(lease, fence, deadline, hold, overhead_s)
    monkeypatch.setattr(E, "time_block", spy)
    try:
        spares_before = [s.proc.pid for s in sup.pool.spares]
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
        assert r.verdict == "pass", (r.category, r.reason, r.error)
        assert seen and all(states and set(states.values()) <= {"T", "t"} for states in seen), seen
        assert all(_proc_state(p) != "T" for s in sup.pool.spares for p in P.process_tree(s.proc.pid))
        r2 = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD, measure_time=False))
        assert r2.verdict == "pass"
        assert spares_before[0] not in [s.proc.pid for s in sup.pool.spares]  # used once, then gone
    finally:
        sup.close()


def test_a_baseline_that_fails_while_timed_is_a_harness_error_not_the_candidates(cache_dir, monkeypatch):
    """A trusted baseline executor dying mid-block is kbenv's fault: raised, never the candidate's crash."""
    from kbenv.sandbox import timing_phase as E
    from kbenv.sandbox.baselines import BaselineError
    from kbenv.sandbox.executors import CandidateFault
    real = E.time_block

    def failing_for_baselines(lease, fence, deadline, hold, overhead_s=0.0):
        if lease.proc.trusted:
            raise CandidateFault("crash", "the executor died from SIGSEGV during eager baseline")
        return real(lease, fence, deadline, hold, overhead_s)
    monkeypatch.setattr(E, "time_block", failing_for_baselines)
    sup = Supervisor(device="cpu", cache_dir=cache_dir, limits={"spawn_s": 30})
    try:
        with pytest.raises(BaselineError, match="baseline failed while timed"):
            sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
        monkeypatch.setattr(E, "time_block", real)
        assert sup.evaluate(EvalRequest(problem=PID, candidate=GOOD)).verdict == "pass"
    finally:
        sup.close()


def test_evaluate_refuses_a_plan_that_does_not_fit_before_anything_allocates(supervisor, monkeypatch):
    """The memory plan is checked in ``evaluate`` itself (not only by the CLI): a typed ValueError naming the
    budget, raised before an executor is taken; the next evaluation that fits works."""
    from kbenv.sandbox.memplan import MemoryPlanError
    monkeypatch.setenv("KBENV_HOST_MEMORY_CAP", "64M")
    spares = [p.proc.pid for p in supervisor.pool.spares]
    with pytest.raises(MemoryPlanError, match="64"):
        supervisor.evaluate(EvalRequest(problem=PID, candidate=GOOD, measure_time=False))
    assert [p.proc.pid for p in supervisor.pool.spares] == spares  # no executor was taken
    monkeypatch.delenv("KBENV_HOST_MEMORY_CAP")
    assert supervisor.evaluate(EvalRequest(problem=PID, candidate=GOOD, measure_time=False)).verdict == "pass"


def test_reference_cache_is_held_to_the_plans_share():
    """Other problems' reference models go first, then cached pairs, until the plan's share holds."""
    import torch

    from kbenv.problems import get_problem
    from kbenv.sandbox.references import References, _model_bytes
    refs = References(torch.device("cpu"), 1 << 40)
    a = refs.state(get_problem("kernelbench/level1/40"), "small", "fp32")  # LayerNorm: it has weights
    b = refs.state(get_problem(PID), "small", "fp32")
    refs.pair(b, 1, "default")
    refs.pair(b, 2, "default")
    keep = (PID, "small", "fp32")
    pair_bytes = refs._bytes
    assert _model_bytes(a) > 0 and pair_bytes > 0
    refs.fit(pair_bytes, keep)  # room for the pairs only: the other problem's model is dropped
    assert ("kernelbench/level1/40", "small", "fp32") not in refs._states and refs._bytes == pair_bytes
    refs.fit(pair_bytes // 2, keep)  # half: the oldest pair goes
    assert refs._bytes <= pair_bytes // 2 and list(b.refs) == [(2, "default")]


def test_fresh_baselines_are_new_for_every_timed_evaluation_and_opened_ahead(cache_dir):
    """The cuda default, exercised on the CPU: every timed evaluation gets baseline processes that no earlier
    evaluation used. The first ones were spawned ahead; when an evaluation ends, the next set is opened at once for
    the same problem (models built, warmed) and the next evaluation of that problem takes it over. A candidate that
    does not compile consumes none, one that compiles and then fails takes its set with it, and nothing is left
    after close."""
    from kbenv.sandbox import process as P
    sup = Supervisor(device="cpu", cache_dir=cache_dir, fresh_baselines=True, limits={"spawn_s": 30})

    def current():
        return {k: l.proc.proc.pid for k, l in sup.baselines._leases.items()}
    try:
        first = {k: p.proc.pid for k, p in sup.baselines._ahead.items()}
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
        assert r.verdict == "pass", (r.category, r.reason, r.error)
        opened = current()
        assert sup.baselines._owner == sup.baselines.AHEAD and set(opened.values()).isdisjoint(first.values())
        spawned, ended = {}, []
        real_spawn, real_done = sup.baselines._spawn, sup.baselines.done

        def spawn(kind):
            p = real_spawn(kind)
            spawned[p.proc.pid] = time.monotonic()
            return p

        def done(like=None):
            ended.append(time.monotonic())
            return real_done(like=like)
        sup.baselines._spawn, sup.baselines.done = spawn, done
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
        assert r.verdict == "pass" and r.facts["baseline_setup"]["opened_ahead"], r.facts["baseline_setup"]
        assert r.facts["baseline_setup"]["wait_warmup"] >= 0
        # the set opened for the next evaluation was spawned while this one ran (its imports off the path), not
        # when it ended
        nxt = current()
        assert nxt and all(pid in spawned and spawned[pid] < ended[0] for pid in nxt.values()), (nxt, spawned, ended)
        sup.baselines._spawn, sup.baselines.done = real_spawn, real_done
        sup.baselines.join()
        assert all(P.proc_state(pid) in "XZ" for pid in opened.values())  # used by that evaluation, then gone
        ahead = current()
        assert set(ahead.values()).isdisjoint(opened.values())
        bad = sup.evaluate(EvalRequest(problem=PID, candidate="def broken(:\n"))
        assert bad.verdict == "fail" and bad.category == "compile"
        assert current() == ahead and sup.baselines._owner == sup.baselines.AHEAD  # not consumed before compiling
        bad = sup.evaluate(EvalRequest(problem=PID, candidate=with_forward("return x * 0\n")))
        assert bad.verdict == "fail" and bad.category != "compile", (bad.reason, bad.error)
        sup.baselines.join()
        assert all(P.proc_state(pid) in "XZ" for pid in ahead.values())  # taken over, then gone with the failure
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
        assert r.verdict == "pass" and r.facts["baseline_setup"]["early_warmup"]  # built clean once: warmed early
        procs = [l.proc for l in sup.baselines._leases.values()] + list(sup.baselines._ahead.values())
        assert procs
    finally:
        sup.close()
    sup.baselines.join()
    assert all(p.proc.poll() is not None for p in procs) and not sup.baselines._leases
    assert all(P.proc_state(p.proc.pid) in "XZ" for p in procs)


def test_fewer_spares_while_the_memory_plan_has_room_for_fewer(cache_dir):
    """The pool keeps the spares the evaluation's memory plan has room for: the extra ones have exited before the
    evaluation allocates anything, an evaluation without spares still works, and the target never exceeds the
    configured number."""
    from kbenv.sandbox import process as P
    sup = Supervisor(device="cpu", cache_dir=cache_dir, spares=2, limits={"spawn_s": 30})
    try:
        assert len(sup.pool.spares) == 2
        gone = list(sup.pool.spares)
        sup.pool.set_target(0)
        assert sup.pool.spares == [] and all(P.proc_state(p.proc.pid) in "XZ" for p in gone)
        sup.pool.n = 0
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))  # the CPU plan has room: back to 2
        assert r.verdict == "pass" and sup.pool.n == 2
        sup.pool.set_target(5)
        assert sup.pool.n == 2
    finally:
        sup.close()


def test_the_sandbox_binds_code_only_never_the_drivers_working_directory(monkeypatch, cache_dir):
    """A Ray worker puts the driver's working directory on ``sys.path``; started from /tmp, that once bound the
    host's whole /tmp into every sandbox (read-only). Only package directories are bound: a file planted in the
    host's /tmp is not there for a candidate (which computes right only if it cannot read it)."""
    import sys
    import uuid

    from kbenv.sandbox import process

    secret = f"/tmp/kbenv-host-secret-{uuid.uuid4().hex}"
    with open(secret, "w") as f:
        f.write("token")
    monkeypatch.setattr(sys, "path", ["/tmp", *sys.path])
    try:
        binds = process._code_binds()
        assert "/tmp" not in [binds[i + 1] for i, a in enumerate(binds) if a == "--ro-bind"]
        sup = Supervisor(device="cpu", sandbox="bwrap", cache_dir=cache_dir, builders=0)
        try:
            peek = with_forward(f"import os\nif os.path.exists({secret!r}):\n    return x * 0\n")
            r = sup.evaluate(EvalRequest(problem=PID, candidate=peek))
            assert r.correct, (r.category, r.reason, r.error)
        finally:
            sup.close()
    finally:
        os.unlink(secret)


def test_reaping_a_sandbox_never_touches_a_process_started_after_it_was_killed():
    """A pid namespace's id is reused once the namespace is gone; the reaper of a killed executor waits for the
    processes of its namespace, and must skip those started after the kill (a new spare's, seen once in CI)."""
    import subprocess

    from kbenv.sandbox import process as P
    ns = os.readlink("/proc/self/ns/pid")
    killed_at = P._boot_ticks()
    time.sleep(0.05)  # five clock ticks
    later = subprocess.Popen(["sleep", "30"])
    try:
        assert later.pid in P.pids_in_namespace(ns)
        assert later.pid not in P.pids_in_namespace(ns, started_by=killed_at)
        assert os.getpid() in P.pids_in_namespace(ns, started_by=killed_at)
    finally:
        later.kill()
        later.wait()


def test_killing_an_executor_again_later_spares_a_process_that_reused_its_namespace(monkeypatch):
    """A second kill of an executor already dead (the decoy abandoned, then disposed) scans its namespace id
    for processes started before the first kill only: a sandbox started in between may have been given the id."""
    import subprocess
    from pathlib import Path

    from kbenv.sandbox import process as P
    dead = subprocess.Popen(["true"])
    dead.wait()
    ex = P.ExecutorProcess(dead, -1, -1, -1, Path("/nonexistent"))
    ex.pid_ns = "pid:[4026531836]"
    scans = []
    monkeypatch.setattr(P, "pids_in_namespace", lambda ns, started_by=None: scans.append(started_by) or [])
    ex.signal_kill()  # the first kill
    time.sleep(0.05)  # five clock ticks: a sandbox started now is younger than the kill
    ex.signal_kill()  # the second
    assert len(scans) == 2 and scans[0] is not None and scans[1] == scans[0] < P._boot_ticks()


def test_baselines_opened_ahead_for_one_problem_go_when_another_problem_starts(cache_dir):
    """A set opened ahead for the problem just evaluated is closed before an evaluation of another problem
    allocates anything (its plan has no room for them), and that evaluation gets its own, new ones."""
    sup = Supervisor(device="cpu", cache_dir=cache_dir, fresh_baselines=True, limits={"spawn_s": 30})
    try:
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
        assert r.verdict == "pass", (r.category, r.reason, r.error)
        opened = [l.proc for l in sup.baselines._leases.values()]
        assert opened and sup.baselines._owner == sup.baselines.AHEAD
        sup.baselines.expect("kernelbench/level1/40", "small", "fp32")
        assert not sup.baselines._leases and all(p.proc.poll() is not None for p in opened)
        assert sup.baselines._ahead  # spawned ahead in their place
        sup.baselines.expect("kernelbench/level1/40", "small", "fp32")  # nothing opened ahead: nothing to do
    finally:
        sup.close()


def test_a_hint_naming_another_problem_opens_no_set_ahead_and_starts_the_imported_one(cache_dir):
    """``EvalRequest.next_problem`` (set by ``EvaluatorPool.map``): when the next request is for another problem,
    no baseline set is opened for this one (it would be built, warmed and closed unused); the processes imported
    ahead are started instead, for whichever problem comes. A hint naming this problem opens the set ahead, as no
    hint does. The verdict is the same either way."""
    sup = Supervisor(device="cpu", cache_dir=cache_dir, fresh_baselines=True, limits={"spawn_s": 30})
    try:
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD, next_problem="kernelbench/level1/40"))
        assert r.verdict == "pass", (r.category, r.reason, r.error)
        assert sup.baselines._owner is None and not sup.baselines._leases
        ahead = list(sup.baselines._ahead.values())
        assert ahead and all(p.started and p.proc.poll() is None for p in ahead)
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD, next_problem=PID))
        assert r.verdict == "pass", (r.category, r.reason, r.error)
        assert sup.baselines._owner == sup.baselines.AHEAD and sup.baselines._leases
    finally:
        sup.close()


def test_the_pool_hints_the_problem_next_in_line():
    from kbenv.sandbox.actor import EvaluatorPool
    a, b = EvalRequest(problem=PID, candidate=GOOD), EvalRequest(problem="kernelbench/level1/40", candidate=GOOD)
    assert EvaluatorPool.hinted(a, [(1, b)]).next_problem == "kernelbench/level1/40"
    assert EvaluatorPool.hinted(a, []).next_problem is None  # the last one: no hint
    own = EvalRequest(problem=PID, candidate=GOOD, next_problem=PID)
    assert EvaluatorPool.hinted(own, [(1, b)]).next_problem == PID  # the caller's own hint stands


def test_a_reserve_set_imported_during_an_evaluation_serves_the_next_problem(cache_dir):
    """With the reserve on (the cuda default), a set is imported behind the one the next evaluation may take: when
    the evaluation ends and that one is opened ahead for the same problem, the reserve moves up, so an evaluation
    of another problem finds baseline processes that imported torch during the previous evaluation instead of
    spawning new ones on its path. Without the reserve, nothing imported is left once the set is opened ahead."""
    from kbenv.sandbox import process as P
    for reserve in (True, False):
        sup = Supervisor(device="cpu", cache_dir=cache_dir, fresh_baselines=True, limits={"spawn_s": 30})
        sup.baselines.reserve = reserve
        procs = []
        try:
            r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
            assert r.verdict == "pass", (r.category, r.reason, r.error)
            assert sup.baselines._owner == sup.baselines.AHEAD and not sup.baselines._reserve
            waiting = {k: p.proc.pid for k, p in sup.baselines._ahead.items()}
            if not reserve:
                assert not waiting  # the set opened ahead took the only imported one
                continue
            assert set(waiting) == set(sup.baselines.kinds)
            assert all(p.proc.poll() is None for p in sup.baselines._ahead.values())
            procs = list(sup.baselines._ahead.values())
            sup.baselines.expect("kernelbench/level1/40", "small", "fp32")  # another problem: the reserve serves
            assert {k: p.proc.pid for k, p in sup.baselines._ahead.items()} == waiting
        finally:
            sup.close()
        sup.baselines.join()
        assert all(P.proc_state(p.proc.pid) in "XZ" for p in procs)  # nothing left after close


def test_a_reserve_set_serves_at_once_when_the_set_ahead_has_died(cache_dir, monkeypatch):
    """When the set spawned ahead is found dead as an evaluation opens its baselines, the imported reserve behind
    it serves that evaluation (no new spawn on its path), rather than moving up behind a freshly spawned set."""
    from kbenv.sandbox import baselines as B
    from kbenv.sandbox import process as P
    leased = []

    class Recorded(B.Lease):
        def __init__(self, proc, *a, **k):
            leased.append(proc.proc.pid)
            super().__init__(proc, *a, **k)

    sup = Supervisor(device="cpu", cache_dir=cache_dir, fresh_baselines=True, limits={"spawn_s": 30})
    sup.baselines.reserve = True
    b = sup.baselines
    try:
        assert sup.evaluate(EvalRequest(problem=PID, candidate=GOOD)).verdict == "pass"
        b.close(keep_ahead=True)  # the set opened ahead goes: the next evaluation opens its own
        b._reserve, b._ahead = b._ahead, {k: b._spawn(k) for k in b.kinds}
        reserve = sorted(p.proc.pid for p in b._reserve.values())
        for p in b._ahead.values():  # the set ahead dies before it is taken
            p.proc.kill()
            p.proc.wait()
        monkeypatch.setattr(B, "Lease", Recorded)
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
        assert r.verdict == "pass", (r.category, r.reason, r.error)
        assert sorted(leased[:len(b.kinds)]) == reserve  # the evaluation's own set is the reserve
    finally:
        sup.close()
    b.join()
    assert all(P.proc_state(pid) in "XZ" for pid in reserve)


def test_a_sandbox_dies_with_the_thread_that_spawned_it_so_side_work_runs_on_one_long_lived_thread(cache_dir):
    """bubblewrap's --die-with-parent is the parent-death signal, which Linux sends when the *thread* that spawned
    the sandbox exits. The decoy runs beside correctness, and its executor's disposal starts spares: from a passing
    thread those spares died, and the next evaluation raised HarnessError ("the executor process did not start").
    Side work therefore runs on the supervisor's one long-lived thread. A candidate that fails correctness (its
    decoy abandoned) and a good one, alternately, keep working."""
    import tempfile
    import threading
    from pathlib import Path

    from kbenv.sandbox import process as P
    if not P.have_bwrap():
        pytest.skip("needs bubblewrap")
    root = Path(tempfile.mkdtemp())
    box = {}
    def spawn_and_leave():
        box["p"] = P.spawn(root, "cpu", "bwrap", None, False)
        P.await_ready(box["p"], 60)  # started (bwrap has set its parent-death signal), then the thread exits
    t = threading.Thread(target=spawn_and_leave)
    t.start()
    t.join()
    p = box["p"]
    try:
        deadline = time.monotonic() + 15
        while p.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert p.proc.poll() is not None, "the hazard is gone: a sandbox outlived the thread that spawned it"
    finally:
        p.kill()
    sup = Supervisor(device="cpu", sandbox="bwrap", cache_dir=cache_dir, limits={"spawn_s": 30}, decoy_beside=True)
    try:
        bad = with_forward("return x * 0\n")  # fails correctness: its decoy is abandoned
        for _ in range(2):
            r = sup.evaluate(EvalRequest(problem=PID, candidate=bad, measure_time=False))
            assert r.verdict == "fail" and r.category != "compile", (r.category, r.reason)
            r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD, measure_time=False))
            assert r.verdict == "pass" and r.facts["decoy"]["noop_correct"] is False, (r.category, r.reason, r.error)
    finally:
        sup.close()


@pytest.mark.parametrize("own_ms, rule, removed_ms", [(0.9, "compared", 0.5), (0.3, "own", 0.3)])
def test_the_removed_intercepts_follow_each_calibrated_round(cache_dir, monkeypatch, own_ms, rule, removed_ms):
    """The figures removed from each side's blocks are updated with every calibrated round (forced on the CPU):
    every trusted estimate 0.5 ms, the candidate's own ``own_ms``. At the phase's end each baseline has its
    calibration's figure removed, the candidate the compared baseline's capped by its own (its rule named), and
    the speedup the least rule would have paid is reported beside it."""

    from kbenv.sandbox import timing
    from kbenv.sandbox import timing_phase as E
    from kbenv.sandbox.timing import BlockCalibration
    monkeypatch.setattr(E.TimingPhase, "_calibrates", lambda self, plan, r, cycled=False: True)
    monkeypatch.setattr(timing, "intercept", lambda k, one_s, per_call_s: 5e-4)  # every trusted estimate 0.5 ms
    # (the CPU's come out at 0, the figure before any estimate, which would hide a figure never updated)
    real_own = BlockCalibration.measure_own

    def own(self, *a, **k):
        real_own(self, *a, **k)
        self.own[-1] = own_ms * 1e-3
    monkeypatch.setattr(BlockCalibration, "measure_own", own)
    seen = []
    real_speedup = E.speedup

    def spy(cand, series):
        seen.append((cand.overhead_s, {k: s.overhead_s for k, s in series.items()}))
        return real_speedup(cand, series)
    monkeypatch.setattr(E, "speedup", spy)
    sup = Supervisor(device="cpu", cache_dir=cache_dir, limits={"spawn_s": 30})
    try:
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
        assert r.verdict == "pass", (r.category, r.reason, r.error)
        t = r.timings
        assert t["own_intercept_estimates_ms"] and set(t["own_intercept_estimates_ms"]) == {own_ms}, t
        assert t["block_overhead_estimates_ms"] and all(t["block_overhead_estimates_ms"].values()), t
        cand_s, by_side = seen[-2]  # the paid speedup's figures (the last: the least rule's, reported)
        assert cand_s == pytest.approx(removed_ms * 1e-3) and t["block_overhead_ms"] == pytest.approx(removed_ms)
        assert t["block_overhead_rule"] == rule and seen[-1][0] == pytest.approx(5e-4), (t, seen[-1])
        assert by_side and all(v == pytest.approx(5e-4) for v in by_side.values()), by_side
        assert t["speedup_least_intercept"] > 0, t
    finally:
        sup.close()


def test_the_block_calibration_runs_on_a_trusted_baseline_and_its_failure_is_a_harness_error(cache_dir, monkeypatch):
    """The block's fixed cost is measured on a trusted baseline's executor (``timing.BlockCalibration``, cuda only:
    here forced on the CPU, where it runs through the same path); a failure of that trusted work is kbenv's fault,
    raised as a BaselineError, never the candidate's timeout or crash."""
    from kbenv.sandbox import timing_phase as E
    from kbenv.sandbox.baselines import BaselineError
    from kbenv.sandbox.executors import CandidateFault
    from kbenv.sandbox.timing import BlockCalibration
    asked = []  # (round, cycled): a round's question, for the trusted estimates and the candidate's own
    monkeypatch.setattr(E.TimingPhase, "_calibrates", lambda self, plan, r, cycled=False: asked.append((r, cycled)) or True)
    probed = []
    real = BlockCalibration.measure

    def spy(self, trusted, per_call, fence, device, deadline, n, m=None):
        probed.extend(lease.proc.trusted for lease in trusted.values())
        return real(self, trusted, per_call, fence, device, deadline, n, m)
    monkeypatch.setattr(BlockCalibration, "measure", spy)
    sup = Supervisor(device="cpu", cache_dir=cache_dir, limits={"spawn_s": 30})
    try:
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
        assert r.verdict == "pass", (r.category, r.reason, r.error)
        assert probed and all(probed)  # trusted executors only
        # each round asks once (cycled where the trusted long block cycles over the slots, as the calibration's
        # long block says), for the trusted estimates and the candidate's own alike
        rounds, cycled = sorted({r for r, _ in asked}), r.timings["calibration_calls"] > r.timings["calls_per_block"]
        assert asked == [(k, cycled) for k in rounds], (asked, r.timings["calibration_calls"])
        n, m = r.timings["calls_per_block"], r.timings["calibration_calls"]
        assert m >= n and (len(r.timings["block_overhead_estimates_ms"]) > 0) == (m > 1)
        # what the removed intercepts add (their noise, and the gap), reported with every timed result
        t = r.timings
        assert t["intercept_rel_ci95"] >= 0 and t["intercept_gap_rel"] >= 0, t
        # the candidate's own intercept, a cap on what its blocks lose (BlockCalibration.measure_own)
        assert len(t["own_intercept_estimates_ms"]) > 0 and t["speedup_least_intercept"] > 0, t
        assert t["block_overhead_rule"] in ("compared", "own"), t

        def failing(self, *a, **k):
            raise CandidateFault("timeout", "the executor's GPU work did not end within 60 s of its reply")
        monkeypatch.setattr(BlockCalibration, "measure", failing)
        with pytest.raises(BaselineError, match="calibration baseline failed"):
            sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
        monkeypatch.setattr(BlockCalibration, "measure", real)
        assert sup.evaluate(EvalRequest(problem=PID, candidate=GOOD)).verdict == "pass"
        # the candidate's own one-call block (measure_own) runs the candidate: its failure is the candidate's
        real_own = BlockCalibration.measure_own
        monkeypatch.setattr(BlockCalibration, "measure_own", failing)
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
        assert r.verdict != "pass" and r.category == "timeout", (r.verdict, r.category, r.reason)
        monkeypatch.setattr(BlockCalibration, "measure_own", real_own)
        assert sup.evaluate(EvalRequest(problem=PID, candidate=GOOD)).verdict == "pass"
    finally:
        sup.close()

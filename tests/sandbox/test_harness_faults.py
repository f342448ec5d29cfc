"""Faults of kbenv itself raise loudly; they never become a candidate failure or a low reward."""

import time

import pytest

from kbenv.problems import register_kernelbench_dir
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
    """Supervisor._oom_verdict with the device memory query faked (the decision is what is tested here; the
    real path runs on the GPU machine)."""
    import types

    import torch

    from kbenv.sandbox.supervisor import Supervisor
    sup = Supervisor.__new__(Supervisor)
    sup.device = torch.device("cuda", 0)
    disposed = []
    monkeypatch.setattr(Supervisor, "_dispose", staticmethod(lambda w: disposed.append(w)))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free_bytes, 140 << 30))
    out = torch.empty(1 << 20, dtype=torch.uint8)  # a 1 MiB reference output
    st = types.SimpleNamespace(refs={("seed", "default"): ([], [out])})
    return sup, st, disposed


def test_supervisor_oom_with_memory_back_after_killing_the_worker_is_the_candidates(monkeypatch):
    sup, st, disposed = _oom_case(monkeypatch, free_bytes=100 << 30)
    fault = sup._oom_verdict("worker", st, RuntimeError("CUDA out of memory"))
    assert disposed == ["worker"]
    assert fault.category == "oom" and "held so much GPU memory" in fault.reason


def test_supervisor_oom_without_memory_back_is_a_harness_error(monkeypatch):
    from kbenv.sandbox.supervisor import HarnessError
    sup, st, _ = _oom_case(monkeypatch, free_bytes=1 << 30)
    with pytest.raises(HarnessError):
        sup._oom_verdict("worker", st, RuntimeError("CUDA out of memory"))


def _proc_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return stat[stat.rindex(")") + 2]


def test_spare_worker_is_stopped_during_the_timing_phase(supervisor, monkeypatch):
    """Nothing of the next worker (its imports, its warm-up) runs while a candidate is being timed."""
    from kbenv.sandbox import supervisor as S
    seen = []
    timed = S.Supervisor._time

    def spy(self, req, w, st, precision):
        # A process in uninterruptible sleep (reading a file) stops when that read returns: poll briefly.
        deadline = time.monotonic() + 5
        while True:
            states = {pid: _proc_state(pid) for pid in S._process_tree(self._spare.proc.pid)}
            if set(states.values()) <= {"T", "Z"} or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        seen.append(states)
        return timed(self, req, w, st, precision)

    monkeypatch.setattr(S.Supervisor, "_time", spy)
    res = supervisor.evaluate(EvalRequest(problem=PID, candidate=GOOD))
    assert res.verdict == "pass", res.reason
    assert len(seen) == 1 and seen[0] and set(seen[0].values()) <= {"T", "Z"}, seen
    assert res.facts["spare_paused"] >= 1
    spare = supervisor._spare
    assert "T" not in {_proc_state(p) for p in S._process_tree(spare.proc.pid)}  # resumed after timing
    monkeypatch.setattr(S.Supervisor, "_time", timed)
    assert supervisor.evaluate(EvalRequest(problem=PID, candidate=GOOD)).verdict == "pass"  # it becomes the worker


def test_two_spares_stay_ready_are_paused_in_timing_and_are_gone_after_close(cache_dir, monkeypatch):
    from kbenv.sandbox import supervisor as S
    sup = S.Supervisor(device="cpu", cache_dir=cache_dir, spares=2, limits={"spawn_s": 30})
    seen = []
    timed = S.Supervisor._time

    def spy(self, req, w, st, precision):
        seen.append([s.proc.pid for s in self._spares])
        return timed(self, req, w, st, precision)

    monkeypatch.setattr(S.Supervisor, "_time", spy)
    try:
        assert len(sup._spares) == 2
        first_two = [s.proc.pid for s in sup._spares]
        for _ in range(3):
            res = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD))
            assert res.verdict == "pass", res.reason
            assert len(sup._spares) == 2 and all(s.proc.poll() is None for s in sup._spares)
        assert all(len(pids) == 2 for pids in seen)
        assert res.facts["spare_paused"] >= 2  # both spares' processes were stopped for the timing phase
        assert not set(first_two) & {s.proc.pid for s in sup._spares}  # each evaluation took a fresh worker
        procs = [s.proc for s in sup._spares]
    finally:
        sup.close()
    assert all(p.poll() is not None for p in procs)

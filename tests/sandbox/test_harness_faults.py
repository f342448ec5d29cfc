"""Faults of kbenv itself raise loudly; they never become a candidate failure or a low reward."""

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

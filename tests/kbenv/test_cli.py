import json
import subprocess
import sys

import pytest

from kbenv.agents.scripted import KnownGoodPolicy
from kbenv.prompts import extract_code

PID = "kernelbench/level1/19"


def kbenv(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "kbenv.cli", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def good_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("k") / "good.py"
    p.write_text(extract_code(KnownGoodPolicy().act({"problem_id": PID})))
    return p


def test_eval_json(good_file, tmp_path):
    r = kbenv("eval", "--problem", PID, "--kernel", str(good_file), "--json", "--device", "cpu")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for k in ("problem", "verdict", "correct", "reward", "speedup", "checks", "timings", "error"):
        assert k in d
    assert d["verdict"] == "pass" and d["correct"] and d["timings"]["median_ms"] > 0


def test_eval_candidate_fault_exits_zero(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nos._exit(3)\n")
    r = kbenv("eval", "--problem", PID, "--kernel", str(bad), "--json", "--device", "cpu")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["verdict"] == "fail" and d["category"] == "crash" and d["reward"] == 0


def test_bad_usage_exits_nonzero(good_file):
    assert kbenv("eval", "--problem", "no/such/problem", "--kernel", str(good_file)).returncode == 2
    assert kbenv("frobnicate").returncode == 2


def test_problems_show():
    r = kbenv("problems", "show", "kernelbench/level1/23", "--json")
    d = json.loads(r.stdout)
    assert d["family"] == "softmax" and d["shapes"]["full"] == [[4096, 393216]] and "class Model" in d["source"]
    assert d["floor"]["float_elements"] == 2 * 4096 * 393216

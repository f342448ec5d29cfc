"""Rollouts: Ray-parallel episodes with an append-only record log that survives a kill and resumes."""

import json
import os
import signal
import subprocess
import sys
import time

from kbenv.records import read_records
from kbenv.report import summarize
from kbenv.rollout import RolloutConfig, run_rollout

PROBLEMS = "kernelbench/level1/19,kernelbench/level1/21,kernelbench/level1/88"


def test_rollout_known_good_and_report(pool, tmp_path):
    run = run_rollout(RolloutConfig(policy="known-good", problems=PROBLEMS, turns=2, out=str(tmp_path / "run"),
                                    progress=False), pool=pool)
    recs = read_records(run)
    assert sorted(r["problem"] for r in recs) == sorted(PROBLEMS.split(","))  # each solved on turn 0
    assert all(r["verdict"] == "pass" and r["episode_done"] and r["turn"] == 0 for r in recs)
    s = summarize(recs)
    assert s["final"]["correct_pct"] == 100.0 and s["final"]["passed"] == 3


def test_rollout_known_bad_runs_all_turns(pool, tmp_path):
    run = run_rollout(RolloutConfig(policy="known-bad", problems="kernelbench/level1/24", turns=2,
                                    out=str(tmp_path / "bad"), progress=False), pool=pool)
    recs = read_records(run)
    assert [r["turn"] for r in recs] == [0, 1]
    assert all(r["reward"] == 0.0 and r["verdict"] == "fail" for r in recs)
    assert recs[-1]["episode_done"] and not recs[0]["episode_done"]


def test_resume_after_kill(tmp_path):
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "kbenv.cli", "rollout", "--policy", "known-good", "--problems",
           PROBLEMS, "--turns", "1", "--device", "cpu",
           "--out", str(out), "--no-progress"]
    env = {**os.environ, "KBENV_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 240
    while time.time() < deadline:
        if (out / "records.msgpack").exists() and len(read_records(out)) >= 1:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = read_records(out)
    assert 1 <= len(first) < 3, "the kill should land mid-run"
    r = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    recs = read_records(out)
    done = [(x["problem"], x["episode"]) for x in recs if x["episode_done"]]
    assert sorted(set(done)) == sorted((p, 0) for p in PROBLEMS.split(","))
    assert len(done) == len(set(done)), "a finished episode was evaluated again after resuming"
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["finished"] is True


# -- issue 15: records keep texts, the history chat, resume through records.completed_keys ----------------------

from kbfakes import BAD, GOOD, FakePool  # noqa: E402


class _Scripted:
    """Replies from a list per turn (the same reply for every episode of a turn)."""

    def __init__(self, replies):
        self.replies, self.calls = list(replies), []

    def act_batch(self, observations):
        self.calls.append(observations)
        turn = observations[0]["turn"]
        return [self.replies[turn]] * len(observations)


def test_records_keep_the_chat_sent_the_reply_and_the_candidate(tmp_path):
    from kbenv.records import record_texts
    run = run_rollout(RolloutConfig(problems="kernelbench/level1/19", turns=2, out=str(tmp_path / "r"),
                                    progress=False, device="cpu", chat="history"),
                      pool=FakePool(), policy=_Scripted(["thinking...", GOOD]))
    first, second = (record_texts(r) for r in read_records(run))
    assert [m["role"] for m in first["messages"]] == ["system", "user"] and first["candidate"] is None
    assert first["reply"] == "thinking..."
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]
    assert second["messages"][2]["content"] == "thinking..." and second["reply"] == GOOD
    assert second["candidate"].startswith("import torch")


def test_resume_skips_episodes_that_completed_keys_reports_finished(tmp_path, monkeypatch):
    import kbenv.rollout as rollout
    out = tmp_path / "r"
    cfg = dict(problems="kernelbench/level1/19,kernelbench/level1/21", turns=1, out=str(out), progress=False,
               device="cpu")
    run_rollout(RolloutConfig(**cfg), pool=FakePool(), policy=_Scripted([GOOD]))
    seen = []
    real = rollout.completed_keys
    monkeypatch.setattr(rollout, "completed_keys", lambda *a, **k: seen.append((a, k)) or real(*a, **k))
    pool = FakePool()
    run_rollout(RolloutConfig(resume=True, episodes=2, **cfg), pool=pool, policy=_Scripted([BAD]))
    assert seen and seen[0][1] == {"done_field": "episode_done"}
    assert [(r.problem, r.candidate.endswith("x * 0\n")) for r in pool.requests] == [
        ("kernelbench/level1/19", True), ("kernelbench/level1/21", True)]  # only the new episode 1 of each
    assert len(read_records(out)) == 4


def test_a_policy_that_raises_stops_the_run_as_policy_failed_never_as_a_reward(tmp_path):
    import pytest

    from kbenv.agents import PolicyError
    from kbenv.errors import PolicyFailed

    class Down:
        def act_batch(self, observations):
            raise PolicyError("POST http://127.0.0.1:9/v1/chat/completions failed: ConnectionError")
    pool = FakePool()
    with pytest.raises(PolicyFailed, match="--policy known-good: PolicyError: POST") as e:
        run_rollout(RolloutConfig(problems="kernelbench/level1/19", turns=1, out=str(tmp_path / "r"),
                                  progress=False, device="cpu"), pool=pool, policy=Down())
    assert isinstance(e.value.__cause__, PolicyError) and pool.requests == []
    assert read_records(tmp_path / "r") == []


def test_size_largest_evaluates_each_problem_at_the_largest_size_its_plan_fits(tmp_path, monkeypatch):
    """``--size largest``: a problem whose full size does not fit runs at the size that does, the others at full;
    a problem that fits at no size is refused with the plan's one-line message before any evaluation."""
    import pytest

    import kbenv.rollout as rollout
    from kbenv.sandbox.memplan import MemoryPlanError
    fits = {"kernelbench/level1/19": "medium", "kernelbench/level1/21": "small"}  # each fits this machine
    monkeypatch.setattr(rollout._step, "largest_size", lambda pid, precision, device: fits.get(pid))
    pool = FakePool()
    run_rollout(RolloutConfig(problems=",".join(fits), turns=1, size="largest", out=str(tmp_path / "r"),
                              progress=False, device="cpu"), pool=pool, policy=_Scripted([GOOD]))
    assert {r.problem: r.size for r in pool.requests} == fits
    assert {r["problem"]: r["size"] for r in read_records(tmp_path / "r")} == fits

    def none_fits(ids, size, precision, device):
        raise MemoryPlanError("kernelbench/level1/23 at --size small (fp32) needs 9.0 GiB: no size of it fits this device",
                              None, None)
    monkeypatch.setattr(rollout._step, "preflight", none_fits)
    pool = FakePool()
    with pytest.raises(MemoryPlanError, match="no size of it fits"):
        run_rollout(RolloutConfig(problems="kernelbench/level1/23", turns=1, size="largest", out=str(tmp_path / "s"),
                                  progress=False, device="cpu"), pool=pool, policy=_Scripted([GOOD]))
    assert pool.requests == []

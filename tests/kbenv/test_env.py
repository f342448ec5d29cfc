"""The Gymnasium environments: check_env, multi-turn feedback, termination semantics, vector env, batch API."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import kbenv  # noqa: F401 - registers the environments
from kbenv.agents.scripted import KnownGoodPolicy
from kbenv.env import KernelEnv
from kbenv.prompts import extract_code

from kbtest import DEVICE

PID = "kernelbench/level1/19"
GOOD_REPLY = KnownGoodPolicy().act({"problem_id": PID, "prompt": "", "system": "", "turn": 0, "feedback": ""})
BAD_REPLY = "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 0\n```"


class _NoEvaluator:
    """check_env's random actions hold no ModelNew, so the env must never need an evaluator for them."""

    device = DEVICE

    def evaluate(self, req):
        raise AssertionError("a random action reached the evaluator")


@pytest.mark.parametrize("env_id", ["kbenv/KernelBench-v4", "kbenv/DLRMBench-v4"])
def test_check_env(env_id):
    env = gym.make(env_id, evaluator=_NoEvaluator(), device=DEVICE).unwrapped
    check_env(env, skip_render_check=True)


def test_reset_is_deterministic_and_takes_a_problem():
    env = KernelEnv(evaluator=_NoEvaluator(), device=DEVICE)
    o1, _ = env.reset(seed=3)
    o2, _ = env.reset(seed=3)
    assert o1 == o2
    o, info = env.reset(options={"problem": "kernelbench/level1/23"})
    assert o["problem_id"] == "kernelbench/level1/23" and "class Model" in o["prompt"]
    assert info["problem"]["family"] == "softmax" and o["turn"] == 0 and o["feedback"] == ""
    with pytest.raises(ValueError):
        KernelEnv(problems=[PID], evaluator=_NoEvaluator()).reset(options={"problem": "dlrm/1"})


def test_format_failure_and_truncation():
    env = KernelEnv(problems=[PID], max_turns=2, evaluator=_NoEvaluator(), device=DEVICE)
    env.reset(seed=0)
    obs, r, term, trunc, info = env.step("I cannot help with that.")
    assert r == 0.0 and not term and not trunc and info["result"]["category"] == "format"
    assert obs["turn"] == 1 and "format" in obs["feedback"] and "Result of evaluating it" in obs["prompt"]
    obs, r, term, trunc, info = env.step("still no code")
    assert trunc and not term
    with pytest.raises(RuntimeError):
        env.step("x")


def test_multi_turn_through_the_pool(pool):
    env = KernelEnv(problems=[PID], max_turns=3, evaluator=pool)
    env.reset(seed=0)
    obs, r, term, trunc, info = env.step(BAD_REPLY)
    assert r == 0.0 and not term and info["result"]["verdict"] == "fail"
    assert "verdict: fail" in obs["feedback"] and "failed check" in obs["feedback"]
    assert "return x * 0" in obs["prompt"]  # the previous answer is shown back
    obs, r, term, trunc, info = env.step(GOOD_REPLY)
    assert term and not trunc and info["result"]["verdict"] == "pass" and r > 0
    assert info["code"] == extract_code(GOOD_REPLY)


def test_vector_env_and_batch_score(pool):
    from kbenv.batch import KernelVectorEnv, score, trl_reward_func
    venv = KernelVectorEnv(2, pool=pool, problems=[PID], max_turns=1)
    obs, info = venv.reset(seed=0)
    assert list(obs["problem_id"]) == [PID, PID]
    obs, rewards, terms, truncs, infos = venv.step([GOOD_REPLY, BAD_REPLY])
    assert terms[0] and rewards[0] > 0 and rewards[1] == 0 and truncs[1]
    out = score([GOOD_REPLY, "no code", BAD_REPLY], [PID] * 3, pool=pool)
    assert [round(r, 6) > 0 for r, _ in out] == [True, False, False]
    assert out[1][1].category == "format"
    f = trl_reward_func(pool=pool)
    rewards = f(prompts=["p", "p"], completions=[[{"role": "assistant", "content": GOOD_REPLY}], BAD_REPLY],
                problem_id=[PID, PID])
    assert rewards[0] > 0 and rewards[1] == 0.0
    assert isinstance(np.asarray(rewards), np.ndarray)


# -- Gymnasium conventions and the one path from action to reward (issue 15) -----------------------------------

from kbfakes import BAD, GOOD, FakePool  # noqa: E402


def test_v0_to_v3_ids_fail_with_a_message_naming_v4():
    for old, new in [(f"kbenv/{name}-{v}", f"kbenv/{name}-v4") for name in ("KernelBench", "DLRMBench")
                     for v in ("v0", "v1", "v2", "v3")]:
        with pytest.raises(gym.error.DeprecatedEnv, match=new):
            gym.make(old, evaluator=_NoEvaluator())


def test_reset_takes_problem_id_and_keeps_problem_as_an_alias():
    env = KernelEnv(evaluator=_NoEvaluator(), device=DEVICE)
    o, _ = env.reset(options={"problem_id": "kernelbench/level1/23"})
    assert o["problem_id"] == "kernelbench/level1/23"
    o, _ = env.reset(options={"problem": "kernelbench/level1/88"})
    assert o["problem_id"] == "kernelbench/level1/88"
    with pytest.raises(ValueError, match="problem_id"):
        env.reset(options={"problme_id": "kernelbench/level1/88"})


def test_unknown_render_mode_is_refused_and_ansi_renders():
    with pytest.raises(ValueError, match="render_mode"):
        KernelEnv(problems=[PID], evaluator=_NoEvaluator(), render_mode="rgb_array")
    env = KernelEnv(problems=[PID], evaluator=_NoEvaluator(), device=DEVICE, render_mode="ansi")
    env.reset(seed=0)
    assert env.render() == PID
    env.step("no code here")
    assert "format" in env.render()


def test_action_space_contains_any_string_step_accepts():
    env = KernelEnv(problems=[PID], evaluator=FakePool(), device=DEVICE)
    reply = "Voilà — ünïcode and emoji 🚀\n" + GOOD
    assert env.action_space.contains(reply) and env.action_space.contains("")
    assert not env.action_space.contains(b"bytes") and not env.action_space.contains(3)
    assert isinstance(env.action_space, gym.spaces.Text)
    env.reset(seed=0)
    _, r, term, _, info = env.step(reply)
    assert term and r == 1.0 and info["result"]["verdict"] == "pass"


def test_env_and_its_methods_have_structured_docstrings():
    for section in ("Observation", "Action", "Reward", "Episode end", "Info", "Args", "Raises"):
        assert f"{section}" in KernelEnv.__doc__
    for method in (KernelEnv.reset, KernelEnv.step, KernelEnv.close, KernelEnv.prepare, KernelEnv.advance):
        assert method.__doc__ and len(method.__doc__.strip()) > 30, method.__name__
    assert "Returns" in KernelEnv.step.__doc__ and "Raises" in KernelEnv.reset.__doc__


def test_history_chat_grows_turn_by_turn_while_resend_stays_two_messages():
    hist = KernelEnv(problems=[PID], max_turns=3, evaluator=FakePool(), device=DEVICE, chat="history")
    o, _ = hist.reset(seed=0)
    assert [m["role"] for m in o["messages"]] == ["system", "user"]
    o, *_ = hist.step(BAD)
    assert [m["role"] for m in o["messages"]] == ["system", "user", "assistant", "user"]
    assert o["messages"][2]["content"] == BAD and "verdict: fail" in o["messages"][3]["content"]
    assert "class Model" not in o["prompt"]  # the problem is already in the conversation
    o, *_ = hist.step("still thinking")
    assert len(o["messages"]) == 6
    assert o in hist.observation_space
    resend = KernelEnv(problems=[PID], max_turns=3, evaluator=FakePool(), device=DEVICE)
    resend.reset(seed=0)
    o, *_ = resend.step(BAD)
    assert [m["role"] for m in o["messages"]] == ["system", "user"] and "class Model" in o["prompt"]
    assert o["messages"][1]["content"] == o["prompt"]
    with pytest.raises(ValueError, match="chat"):
        KernelEnv(problems=[PID], evaluator=FakePool(), chat="tree")


def test_check_env_passes_with_growing_history():
    check_env(KernelEnv(evaluator=_NoEvaluator(), device=DEVICE, chat="history"), skip_render_check=True)


def test_close_stops_the_pool_the_env_started_and_not_one_passed_in(monkeypatch):
    import kbenv.sandbox.actor as actor
    started = []

    def fake_pool(**kwargs):
        started.append(kwargs)
        return FakePool()
    monkeypatch.setattr(actor, "EvaluatorPool", fake_pool)
    env = KernelEnv(problems=[PID], device="cpu", limits={"compile_s": 5})
    env.reset(seed=0)
    env.step(GOOD)
    pool = env.evaluator
    assert started == [{"device": "cpu", "address": None, "config": {"limits": {"compile_s": 5}}}]
    env.close()
    assert pool.closed and env._evaluator is None
    mine = FakePool()
    env2 = KernelEnv(problems=[PID], evaluator=mine)
    env2.close()
    assert not mine.closed
    env3 = KernelEnv(problems=[PID], device="cpu", timing_budget=1.25)
    env3.reset(seed=0)
    env3.step(GOOD)
    assert started[-1]["config"] == {"timing": {"budget_s": 1.25}}
    env3.close()
    with pytest.raises(ValueError, match="timing_budget"):
        KernelEnv(problems=[PID], device="cpu", timing_budget=float("nan"))


def test_env_vector_env_and_score_build_the_same_requests():
    from kbenv.batch import KernelVectorEnv, score
    pools = [FakePool(), FakePool(), FakePool()]
    env = KernelEnv(problems=[PID], evaluator=pools[0], precision="fp32", reward_fn="speedup")
    env.reset(seed=0)
    env.step(GOOD)
    venv = KernelVectorEnv(1, pool=pools[1], problems=[PID], precision="fp32", reward_fn="speedup")
    venv.reset(seed=0)
    venv.step([GOOD])
    score([GOOD], [PID], pool=pools[2], precision="fp32", reward_fn="speedup")
    reqs = [p.requests[0].to_dict() for p in pools]
    assert reqs[0] == reqs[1] == reqs[2]
    assert reqs[0]["size"] == "small" and reqs[0]["candidate"].startswith("import torch")


def test_format_failures_are_built_in_one_place_with_one_message():
    from kbenv.batch import KernelVectorEnv, score
    from kbenv.step import FORMAT_FAILURE_REASON
    pool = FakePool()
    env = KernelEnv(problems=[PID], evaluator=pool)
    env.reset(seed=0)
    reasons = [env.step("no code")[4]["result"]["reason"]]
    venv = KernelVectorEnv(1, pool=pool, problems=[PID])
    venv.reset(seed=0)
    reasons.append(venv.step(["no code"])[4]["result"][0]["reason"])
    reasons.append(score(["no code"], [PID], pool=pool)[0][1].reason)
    assert reasons == [FORMAT_FAILURE_REASON] * 3 and pool.requests == []


def test_size_auto_rule_is_written_once():
    import pathlib
    import re

    from kbenv.step import resolve_size
    assert resolve_size("auto", "cuda:1") == "full" and resolve_size(None, "cpu") == "small"
    assert resolve_size("small", "cuda") == "small"
    root = pathlib.Path(__file__).resolve().parents[2] / "kbenv"
    rule = re.compile(r"\"full\" if .*cuda.* else \"small\"")
    holders = [p.name for p in root.glob("*.py") if rule.search(p.read_text())]
    assert holders == ["step.py"]


def test_cuda_on_a_machine_without_one_is_a_usage_error(monkeypatch):
    import torch

    from kbenv.errors import UsageError
    from kbenv.step import resolve_device
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UsageError, match="--device"):
        resolve_device("cuda")
    assert resolve_device("auto") == "cpu"

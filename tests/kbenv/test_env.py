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


@pytest.mark.parametrize("env_id", ["kbenv/KernelBench-v0", "kbenv/DLRMBench-v0"])
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

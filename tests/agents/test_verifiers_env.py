"""kbenv as a verifiers environment, rolled out by verifiers itself against the loopback chat server.

CI installs verifiers (requirements-cpu.txt); elsewhere a missing verifiers skips these tests, and under CI
(``CI`` set) it fails them.
"""

from __future__ import annotations

import asyncio
import importlib
import os

import pytest

from kbenv.agents.scripted import KnownGoodPolicy

from test_openai_chat import FakeChatServer

PID = "kernelbench/level1/19"
GOOD = KnownGoodPolicy().act({"problem_id": PID})


def need(module: str):
    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"the trainer extra {module!r} is not installed")


def completion(content: str) -> dict:
    return {"body": {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "test-model",
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}}


@pytest.fixture
def server():
    fake = FakeChatServer()
    fake.thread.start()
    yield fake
    fake.httpd.shutdown()
    fake.httpd.server_close()


def rollout(env, server, monkeypatch):
    """One episode of the env's first task, run by verifiers' own episode machinery."""
    vf = need("verifiers.v1")
    monkeypatch.setenv("KBENV_TEST_KEY", "sk-test")
    ctx = vf.ModelContext(model="test-model",
                          client=vf.EvalClientConfig(base_url=server.base_url, api_key_var="KBENV_TEST_KEY"))
    task = next(iter(env.taskset))

    async def run():
        async with env.serving():
            return await env.run_episode(task, ctx)
    return asyncio.run(run())


def test_load_environment_scores_a_reply_with_kbenv(pool, server, monkeypatch):
    need("verifiers")
    from kbenv.verifiers_env import load_environment
    env = load_environment([PID], pool=pool)
    server.script.append(completion(GOOD))
    episode = rollout(env, server, monkeypatch)
    assert episode.ok and not episode.errors, episode.errors
    (trace,) = episode.traces
    assert trace.reward == pytest.approx(1.0) and trace.info["kbenv"][0]["verdict"] == "pass"
    (request,) = server.requests
    assert request["body"]["messages"][0]["role"] == "system"
    assert "class Model" in request["body"]["messages"][-1]["content"]  # kbenv's own prompt for the problem


def test_multi_turn_feeds_kbenv_feedback_back_and_the_chat_grows(pool, server, monkeypatch):
    need("verifiers")
    from kbenv.verifiers_env import load_environment
    env = load_environment([PID], max_turns=3, pool=pool)
    server.script.extend([completion("Let me think about it."), completion(GOOD)])
    episode = rollout(env, server, monkeypatch)
    (trace,) = episode.traces
    assert [r["verdict"] for r in trace.info["kbenv"]] == ["fail", "pass"]
    assert trace.info["kbenv"][0]["category"] == "format" and trace.reward == pytest.approx(1.0)
    first, second = (r["body"]["messages"] for r in server.requests)
    assert [m["role"] for m in second] == [m["role"] for m in first] + ["assistant", "user"]
    assert second[-2]["content"] == "Let me think about it." and "verdict: fail (format)" in second[-1]["content"]


def test_a_failing_reply_gets_zero_reward(pool, server, monkeypatch):
    need("verifiers")
    from kbenv.verifiers_env import load_environment
    env = load_environment([PID], pool=pool)
    server.script.append(completion("```python\nimport torch\nclass ModelNew(torch.nn.Module):\n"
                                    "    def forward(self, x):\n        return x * 0\n```"))
    (trace,) = rollout(env, server, monkeypatch).traces
    assert trace.reward == 0.0 and trace.info["kbenv"][0]["verdict"] == "fail"
    assert trace.info["kbenv"][0]["category"] not in (None, "format")

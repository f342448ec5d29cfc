"""The Policy base class: act_batch's order, concurrency and error handling."""

from __future__ import annotations

import threading
import time

import pytest

from kbenv.agents import Policy, chat_messages


class SlowUpper(Policy):
    """Upper-cases the prompt after a delay that shrinks along the batch, so completion order is reversed."""

    def __init__(self, max_concurrency: int) -> None:
        self.max_concurrency = max_concurrency
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0

    def act(self, observation: dict) -> str:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        time.sleep(0.02 * (10 - observation["turn"]))
        with self.lock:
            self.in_flight -= 1
        if observation["prompt"] == "boom":
            raise RuntimeError("boom")
        return observation["prompt"].upper()


def observations(prompts: list[str]) -> list[dict]:
    return [
        {"prompt": p, "system": "", "problem_id": "dlrm/1", "turn": i, "feedback": ""} for i, p in enumerate(prompts)
    ]


def test_act_batch_keeps_order_under_concurrency():
    policy = SlowUpper(max_concurrency=3)
    prompts = [f"p{i}" for i in range(9)]
    assert policy.act_batch(observations(prompts)) == [p.upper() for p in prompts]
    assert policy.max_in_flight == 3


def test_act_batch_is_sequential_with_max_concurrency_1():
    policy = SlowUpper(max_concurrency=1)
    assert policy.act_batch(observations(["a", "b", "c"])) == ["A", "B", "C"]
    assert policy.max_in_flight == 1


def test_act_batch_raises_the_failure():
    with pytest.raises(RuntimeError, match="boom"):
        SlowUpper(max_concurrency=4).act_batch(observations(["a", "boom", "c"]))


def test_act_batch_of_nothing():
    assert SlowUpper(max_concurrency=4).act_batch([]) == []


def test_base_act_is_abstract():
    with pytest.raises(NotImplementedError):
        Policy().act(observations(["a"])[0])


def test_chat_messages_leaves_out_an_empty_system_message():
    with_system = {"prompt": "p", "system": "s"}
    assert chat_messages(with_system) == [{"role": "system", "content": "s"}, {"role": "user", "content": "p"}]
    assert chat_messages({"prompt": "p", "system": ""}) == [{"role": "user", "content": "p"}]


def test_chat_messages_follow_the_observations_growing_chat_when_it_has_one():
    from kbenv.agents import chat_messages
    history = ({"role": "system", "content": "sys"}, {"role": "user", "content": "problem"},
               {"role": "assistant", "content": "try 1"}, {"role": "user", "content": "feedback 1"})
    obs = {"prompt": "feedback 1", "system": "sys", "messages": history, "problem_id": "p", "turn": 1,
           "feedback": "f"}
    assert chat_messages(obs) == [dict(m) for m in history]
    obs_empty_system = dict(obs, messages=({"role": "system", "content": ""},) + history[1:])
    assert [m["role"] for m in chat_messages(obs_empty_system)] == ["user", "assistant", "user"]
    assert chat_messages({"prompt": "p", "system": ""}) == [{"role": "user", "content": "p"}]

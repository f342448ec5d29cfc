"""OpenAIChatPolicy against a real OpenAI-compatible HTTP server on loopback."""

from __future__ import annotations

import json
import socket
import threading
import time
import types
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kbenv.agents import OpenAIChatPolicy, PolicyError, openai_chat
from kbenv.agents.openai_chat import backoff_delay_s, parse_retry_after

MODEL = "test-model"


class FakeChatServer:
    """A chat-completions server that records requests and follows a script of responses.

    Each request takes the next step of ``script`` (a dict with optional ``status``, ``headers``, ``body``,
    ``delay_s``); with the script empty it waits ``default_delay_s`` and answers 200 with
    ``"answer to: <user message>"``. Usage is ``len(user message)`` prompt tokens and 5 completion tokens.
    """

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.script: deque[dict] = deque()
        self.default_delay_s = 0.0
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def bodies(self) -> list[dict]:
        return [request["body"] for request in self.requests]


def _make_handler(fake: FakeChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, so the client's connection pool is exercised

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                return
            body = json.loads(raw)
            with fake.lock:
                fake.requests.append({"headers": dict(self.headers), "body": body})
                fake.in_flight += 1
                fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                step = fake.script.popleft() if fake.script else {}
            try:
                time.sleep(step.get("delay_s", fake.default_delay_s))
            finally:
                # Leave the in-flight window before answering, so a client's next request cannot overlap it.
                with fake.lock:
                    fake.in_flight -= 1
            status = step.get("status", 200)
            payload = step.get("body")
            if payload is None and status == 200:
                prompt = body["messages"][-1]["content"]
                payload = {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": f"answer to: {prompt}"},
                         "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": len(prompt), "completion_tokens": 5, "total_tokens": len(prompt) + 5},
                }
            elif payload is None:
                payload = {"error": {"message": f"scripted status {status}"}}
            try:
                self._send(status, payload, step.get("headers", {}))
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)

        def _send(self, status: int, payload: object, headers: dict) -> None:
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def server():
    fake = FakeChatServer()
    fake.thread.start()
    yield fake
    fake.httpd.shutdown()
    fake.httpd.server_close()


def observation(prompt: str = "write ModelNew", system: str = "you write kernels") -> dict:
    return {"prompt": prompt, "system": system, "problem_id": "kernelbench/level1/23", "turn": 0, "feedback": ""}


def make_policy(server: FakeChatServer, **kwargs) -> OpenAIChatPolicy:
    kwargs.setdefault("backoff_base_s", 0.01)
    kwargs.setdefault("timeout_s", 5.0)
    return OpenAIChatPolicy(server.base_url, MODEL, **kwargs)


def test_request_body_reply_and_usage(server):
    policy = make_policy(server, api_key="sk-test", temperature=0.3, top_p=0.9, max_tokens=123, seed=7,
                         extra_body={"top_k": 20})
    reply = policy.act(observation("softmax please"))
    assert reply == "answer to: softmax please"
    (request,) = server.requests
    assert request["body"] == {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "you write kernels"},
            {"role": "user", "content": "softmax please"},
        ],
        "temperature": 0.3,
        "top_p": 0.9,
        "max_tokens": 123,
        "seed": 7,
        "top_k": 20,
    }
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    assert policy.usage == {
        "prompt_tokens": len("softmax please"),
        "completion_tokens": 5,
        "total_tokens": len("softmax please") + 5,
        "requests": 1,
        "retries": 0,
    }
    policy.act(observation("again"))
    assert policy.usage["prompt_tokens"] == len("softmax please") + len("again")
    assert policy.usage["requests"] == 2


def test_defaults_in_request_body(server):
    make_policy(server).act(observation())
    body = server.bodies[0]
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.0, 1.0, 4096)
    assert "n" not in body and "seed" not in body


def test_api_key_from_environment(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    make_policy(server).act(observation())
    monkeypatch.delenv("OPENAI_API_KEY")
    make_policy(server).act(observation())
    assert server.requests[0]["headers"]["Authorization"] == "Bearer env-key"
    assert "Authorization" not in server.requests[1]["headers"]


@pytest.fixture
def waits(monkeypatch) -> list[float]:
    """The delays the policy asks to sleep, recorded instead of slept (the test server keeps real time)."""
    recorded: list[float] = []
    monkeypatch.setattr(openai_chat, "time", types.SimpleNamespace(sleep=recorded.append))
    return recorded


def test_429_is_retried_after_retry_after(server, waits):
    server.script.append({"status": 429, "headers": {"Retry-After": "0"}})
    policy = make_policy(server, backoff_base_s=1000.0, backoff_max_s=1000.0)
    assert policy.act(observation("x")) == "answer to: x"
    assert waits == [0.0]
    assert len(server.requests) == 2
    assert policy.usage["requests"] == 1 and policy.usage["retries"] == 1


def test_retry_after_overrides_a_shorter_backoff(server, waits):
    server.script.extend([{"status": 503, "headers": {"Retry-After": "7"}}, {"status": 502}])
    policy = make_policy(server, backoff_base_s=0.5, backoff_max_s=0.5)
    assert policy.act(observation("x")) == "answer to: x"
    assert waits[0] == 7.0
    assert 0.0 <= waits[1] <= 0.5  # no Retry-After: jittered backoff


def test_backoff_grows_between_retries(server, waits, monkeypatch):
    monkeypatch.setattr(openai_chat.random, "uniform", lambda low, high: high)  # the ceiling of each draw
    server.script.extend([{"status": 500}] * 4)
    make_policy(server, backoff_base_s=1.0, backoff_max_s=5.0, max_retries=4).act(observation())
    assert waits == [1.0, 2.0, 4.0, 5.0]


def test_retry_after_is_really_waited_for(server):
    server.script.append({"status": 503, "headers": {"Retry-After": "1"}})
    policy = make_policy(server, backoff_base_s=0.001)
    started = time.monotonic()
    assert policy.act(observation("x")) == "answer to: x"
    assert time.monotonic() - started >= 0.95


def test_500_twice_then_200(server):
    server.script.extend([{"status": 500}, {"status": 500}])
    policy = make_policy(server)
    assert policy.act(observation("y")) == "answer to: y"
    assert len(server.requests) == 3
    assert server.bodies[0] == server.bodies[2]
    assert policy.usage["requests"] == 1 and policy.usage["retries"] == 2
    assert policy.usage["completion_tokens"] == 5


def test_400_is_not_retried(server):
    server.script.append({"status": 400, "body": {"error": {"message": "unknown model 'test-model'"}}})
    with pytest.raises(PolicyError) as raised:
        make_policy(server).act(observation())
    assert raised.value.status == 400
    assert "HTTP 400" in str(raised.value) and "unknown model" in str(raised.value)
    assert "unknown model" in raised.value.body
    assert len(server.requests) == 1


def test_5xx_gives_up_after_max_retries(server):
    server.script.extend([{"status": 503}] * 5)
    with pytest.raises(PolicyError) as raised:
        make_policy(server, max_retries=2).act(observation())
    assert raised.value.status == 503
    assert "gave up after 3 attempts" in str(raised.value)
    assert len(server.requests) == 3


def test_slow_response_times_out_and_is_retried(server):
    server.script.extend([{"delay_s": 0.8}] * 3)
    policy = make_policy(server, timeout_s=0.2, max_retries=2)
    started = time.monotonic()
    with pytest.raises(PolicyError) as raised:
        policy.act(observation())
    assert time.monotonic() - started < 2.0  # three attempts cut at 0.2 s, not waited out at 0.8 s
    assert raised.value.status is None
    assert "Timeout" in str(raised.value)
    assert len(server.requests) == 3


def test_connection_refused_raises_policy_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    policy = OpenAIChatPolicy(f"http://127.0.0.1:{port}/v1", MODEL, max_retries=1, backoff_base_s=0.001)
    with pytest.raises(PolicyError) as raised:
        policy.act(observation())
    assert raised.value.status is None and "ConnectionError" in str(raised.value)
    assert policy.usage["retries"] == 1


@pytest.mark.parametrize("payload", [{"object": "error"}, {"choices": []}, "not json"])
def test_malformed_200_raises(server, payload):
    server.script.append({"status": 200, "body": payload})
    with pytest.raises(PolicyError):
        make_policy(server).act(observation())
    assert len(server.requests) == 1


def test_null_content_is_an_empty_reply(server):
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": None}}]}
    server.script.append({"status": 200, "body": body})
    assert make_policy(server).act(observation()) == ""


def test_act_batch_runs_max_concurrency_at_once_in_order(server):
    server.default_delay_s = 0.2
    policy = make_policy(server, max_concurrency=4)
    prompts = [f"problem {i}" for i in range(16)]
    replies = policy.act_batch([observation(p) for p in prompts])
    assert replies == [f"answer to: {p}" for p in prompts]
    assert len(server.requests) == 16
    assert server.max_in_flight == 4
    assert policy.usage["requests"] == 16
    assert policy.usage["prompt_tokens"] == sum(len(p) for p in prompts)
    assert policy.usage["total_tokens"] == sum(len(p) for p in prompts) + 16 * 5


def test_act_batch_raises_the_first_failure(server):
    server.script.append({"status": 400})
    policy = make_policy(server, max_concurrency=2)
    with pytest.raises(PolicyError):
        policy.act_batch([observation(f"p{i}") for i in range(4)])


def test_parse_retry_after():
    assert parse_retry_after(None) is None
    assert parse_retry_after("0") == 0.0
    assert parse_retry_after(" 2.5 ") == 2.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after("inf") is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: go now
    in_an_hour = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 3600))
    assert 3500 < parse_retry_after(in_an_hour) <= 3600


def test_backoff_is_exponential_with_full_jitter():
    draws = [backoff_delay_s(3, base_s=1.0, max_s=60.0) for _ in range(2000)]
    assert all(0.0 <= d <= 8.0 for d in draws)
    assert max(draws) > 6.0 and min(draws) < 2.0  # jittered over the whole range, not fixed
    assert all(0.0 <= backoff_delay_s(20, base_s=1.0, max_s=60.0) <= 60.0 for _ in range(100))


def test_rejects_nonsense_settings():
    with pytest.raises(ValueError):
        OpenAIChatPolicy("http://127.0.0.1:1/v1", MODEL, max_concurrency=0)
    with pytest.raises(ValueError):
        OpenAIChatPolicy("http://127.0.0.1:1/v1", MODEL, max_retries=-1)

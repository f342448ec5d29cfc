"""A policy that asks an OpenAI-compatible chat-completions server (vLLM, SGLang, hosted APIs) over HTTP."""

from __future__ import annotations

import email.utils
import json
import math
import os
import random
import threading
import time
from datetime import datetime, timezone
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from .base import Observation, Policy, PolicyError, chat_messages

#: Statuses worth asking again: rate limiting and server-side failures.
RETRYABLE_STATUSES = frozenset({429}) | frozenset(range(500, 600))

#: How much of a response body goes into an error message.
BODY_EXCERPT_CHARS = 500


class OpenAIChatPolicy(Policy):
    """Reply with ``POST {base_url}/chat/completions`` on an OpenAI-compatible server.

    Each observation becomes ``[{"role": "system", ...}, {"role": "user", ...}]`` (the system message is left
    out when empty) and the reply is ``choices[0].message.content`` (``""`` when the server returns no
    content, e.g. a reasoning model that spent ``max_tokens`` thinking: that is the model's failure, which the
    env scores). :meth:`act_batch` sends up to ``max_concurrency`` requests at once over one pooled session.

    Connection errors, timeouts, 429 and 5xx are retried up to ``max_retries`` times: the wait is the server's
    ``Retry-After`` when it sends one, otherwise exponential backoff with full jitter
    (uniform in ``[0, min(backoff_max_s, backoff_base_s * 2**attempt)]``). Any other non-2xx status, a
    malformed response, or running out of retries raises :class:`PolicyError` with the status and an excerpt of
    the body.

    Args:
        base_url: the API root, e.g. ``http://localhost:8000/v1`` (``/chat/completions`` is appended).
        model: the ``model`` field of the request.
        api_key: sent as ``Authorization: Bearer``; ``None`` reads ``OPENAI_API_KEY``; no header when neither.
        temperature: sampling temperature (0 = greedy, KernelBench's default).
        top_p: nucleus sampling mass.
        max_tokens: most tokens in the reply.
        n: number of choices to ask for (only the first is returned); left out of the request when ``None``.
        seed: sampling seed; left out of the request when ``None``.
        timeout_s: seconds to wait for the connection and then between bytes of the response.
        max_retries: retries after the first attempt (so at most ``max_retries + 1`` requests per reply).
        max_concurrency: most requests in flight from :meth:`act_batch`; also the size of the connection pool.
        extra_body: extra request fields merged into the body last (e.g. ``{"top_k": 20}`` for vLLM, or
            ``{"chat_template_kwargs": {"enable_thinking": False}}``); they override the fields above.
        backoff_base_s: first backoff ceiling in seconds.
        backoff_max_s: largest backoff ceiling in seconds (a server's ``Retry-After`` is honoured even when
            longer).

    Attributes:
        usage: totals over this policy's lifetime (a snapshot, safe to read while requests run):
            ``prompt_tokens``, ``completion_tokens``, ``total_tokens`` from the responses' ``usage`` fields,
            ``requests`` (successful responses) and ``retries`` (attempts that were retried).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_tokens: int = 4096,
        n: int | None = None,
        seed: int | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        max_concurrency: int = 8,
        extra_body: dict[str, Any] | None = None,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 60.0,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be at least 0, got {max_retries}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = max_tokens
        self.n = n
        self.seed = seed
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_concurrency = max_concurrency
        self.extra_body = dict(extra_body or {})
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s

        api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.session = requests.Session()
        # One pooled connection per concurrent request; retries are ours, not urllib3's.
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=max_concurrency, max_retries=0)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.headers["Content-Type"] = "application/json"
        if api_key:
            self.session.headers["Authorization"] = f"Bearer {api_key}"

        self._usage_lock = threading.Lock()
        self._usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "requests": 0, "retries": 0}

    @property
    def usage(self) -> dict[str, int]:
        with self._usage_lock:
            return dict(self._usage)

    def request_body(self, observation: Observation) -> dict[str, Any]:
        """The JSON body sent for one observation."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(observation),
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
        }
        if self.n is not None:
            body["n"] = self.n
        if self.seed is not None:
            body["seed"] = self.seed
        body.update(self.extra_body)
        return body

    def act(self, observation: Observation) -> str:
        response = self._post(self.request_body(observation))
        try:
            content = response["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise PolicyError(
                f"{self.url} answered without choices[0].message.content: "
                f"{_excerpt(json.dumps(response))}",
                status=200,
                body=_excerpt(json.dumps(response)),
            ) from None
        self._add_usage(response.get("usage"))
        return content if isinstance(content, str) else ""

    def close(self) -> None:
        """Close the pooled connections."""
        self.session.close()

    def __enter__(self) -> OpenAIChatPolicy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` with retries; return the decoded JSON of the first 2xx response."""
        data = json.dumps(body).encode("utf-8")
        for attempt in range(self.max_retries + 1):
            retry_after_s = None
            cause: BaseException | None = None
            try:
                response = self.session.post(self.url, data=data, timeout=self.timeout_s)
            except (requests.ConnectionError, requests.Timeout) as exc:
                failure = PolicyError(f"POST {self.url} failed: {type(exc).__name__}: {exc}")
                cause = exc
            else:
                if 200 <= response.status_code < 300:
                    try:
                        decoded = response.json()
                    except ValueError:
                        raise PolicyError(
                            f"POST {self.url} returned HTTP {response.status_code} with a body that is not JSON: "
                            f"{_excerpt(response.text)}",
                            status=response.status_code,
                            body=_excerpt(response.text),
                        ) from None
                    if not isinstance(decoded, dict):
                        raise PolicyError(
                            f"POST {self.url} returned JSON that is not an object: {_excerpt(response.text)}",
                            status=response.status_code,
                            body=_excerpt(response.text),
                        )
                    return decoded
                failure = PolicyError(
                    f"POST {self.url} returned HTTP {response.status_code}: {_excerpt(response.text)}",
                    status=response.status_code,
                    body=_excerpt(response.text),
                )
                if response.status_code not in RETRYABLE_STATUSES:
                    raise failure
                retry_after_s = parse_retry_after(response.headers.get("Retry-After"))
            if attempt == self.max_retries:
                break
            with self._usage_lock:
                self._usage["retries"] += 1
            if retry_after_s is None:
                retry_after_s = backoff_delay_s(attempt, self.backoff_base_s, self.backoff_max_s)
            time.sleep(retry_after_s)
        raise PolicyError(
            f"gave up after {self.max_retries + 1} attempts; last: {failure}", status=failure.status, body=failure.body
        ) from cause

    def _add_usage(self, usage: Any) -> None:
        with self._usage_lock:
            self._usage["requests"] += 1
            if isinstance(usage, dict):
                for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
                    value = usage.get(key)
                    if isinstance(value, int):
                        self._usage[key] += value


def backoff_delay_s(attempt: int, base_s: float, max_s: float) -> float:
    """Full-jitter exponential backoff: uniform in ``[0, min(max_s, base_s * 2**attempt)]`` (attempt is 0-based)."""
    return random.uniform(0.0, min(max_s, base_s * 2.0**attempt))


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delay in seconds or an HTTP date); ``None`` if unusable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _excerpt(text: str) -> str:
    text = text.strip()
    return text if len(text) <= BODY_EXCERPT_CHARS else text[:BODY_EXCERPT_CHARS] + "..."

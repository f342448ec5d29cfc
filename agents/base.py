"""The policy interface every kbenv agent implements.

A policy turns observations into actions. kbenv's environments hand it an **observation**, a dict with these
keys (the env owns their content; a policy reads them and never changes them):

- ``prompt`` (str): the full user message for this turn: instructions and the problem's source on turn 0; on
  later turns it also holds the feedback on the previous answer.
- ``system`` (str): the system message.
- ``problem_id`` (str): the stable problem id, e.g. ``kernelbench/level1/23`` or ``dlrm/1``.
- ``turn`` (int): the 0-based turn within the episode.
- ``feedback`` (str): feedback on the previous answer; empty on turn 0.

The **action** is the model's reply text, as a string. The env extracts the code block from it itself, so a
policy returns the reply unchanged (a reply without a code block is the model's failure, scored by the env).

A policy does not remember earlier turns: ``prompt`` already carries everything the turn needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

Observation = dict[str, Any]


class PolicyError(RuntimeError):
    """A policy could not produce a reply (the model server refused, failed or never answered).

    This is a fault of the serving side, not a bad answer from the model: callers must not turn it into a low
    reward. (agents/ does not import kbenv, so this is not a subclass of kbenv's errors: kbenv's rollout runner
    turns any exception of a policy into :class:`kbenv.errors.PolicyFailed`.)

    Attributes:
        status: the HTTP status of the last response, or ``None`` when no response came back (connection error,
            timeout) or the policy is not HTTP-based.
        body: an excerpt of the last response body ("" when there was none).
    """

    def __init__(self, message: str, *, status: int | None = None, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class Policy:
    """Base class of kbenv policies.

    Subclasses implement :meth:`act`. :meth:`act_batch` calls :meth:`act` from a thread pool of at most
    :attr:`max_concurrency` threads, which suits policies that wait on I/O (an HTTP model server); a policy
    that batches on its own device (a local model) overrides it. :meth:`reset` does nothing here.

    Contract:

    - ``act(observation)`` returns the reply text for one observation; it may block.
    - ``act_batch(observations)`` returns one reply per observation, **in the same order**; it may run the
      observations concurrently, so ``act`` must be thread-safe when ``max_concurrency > 1``. If any reply
      fails, the first failure (in observation order) is raised and observations not yet started are dropped.
    - ``reset()`` is called at the start of each new batch of episodes; a stateless policy does nothing.
    - Errors that are the serving side's fault raise :class:`PolicyError`; they are never returned as text.
    """

    #: Most observations :meth:`act_batch` runs at the same time.
    max_concurrency: int = 1

    def act(self, observation: Observation) -> str:
        """Return the reply text for one observation."""
        raise NotImplementedError(f"{type(self).__name__} must implement act()")

    def act_batch(self, observations: Sequence[Observation]) -> list[str]:
        """Return one reply per observation, in order, running up to ``max_concurrency`` at once."""
        observations = list(observations)
        workers = min(max(1, int(self.max_concurrency)), len(observations))
        if workers <= 1:
            return [self.act(observation) for observation in observations]
        executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"{type(self).__name__}.act")
        futures: list[Future[str]] = [executor.submit(self.act, observation) for observation in observations]
        try:
            return [future.result() for future in futures]
        finally:
            # On a failure, drop what has not started; either way wait for running calls so none outlives us.
            executor.shutdown(wait=True, cancel_futures=True)

    def reset(self) -> None:
        """Start of a new batch of episodes. Stateless policies do nothing."""


def chat_messages(observation: Observation) -> list[dict[str, str]]:
    """The chat messages for one observation.

    The observation's ``messages`` when it has them (the env's chat so far, which grows turn by turn with
    ``chat="history"``); otherwise the system message (if non-empty), then the user prompt. Empty system
    messages are left out either way.
    """
    if observation.get("messages"):
        return [{"role": m["role"], "content": m["content"]} for m in observation["messages"]
                if m["role"] != "system" or m["content"]]
    messages = []
    if observation["system"]:
        messages.append({"role": "system", "content": observation["system"]})
    messages.append({"role": "user", "content": observation["prompt"]})
    return messages

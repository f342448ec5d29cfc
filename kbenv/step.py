"""One path from an action to a reward: every caller (the env, the vector env, ``score``, the rollout runner)
turns a reply into a request here, and evaluates through :func:`evaluate`.

- :func:`prepare` extracts the candidate from a reply and builds its :class:`~kbenv.sandbox.result.EvalRequest`;
  a reply with no ``ModelNew`` is decided here, as a ``format`` failure, without an evaluation.
- :func:`evaluate` runs the prepared actions that need an evaluation on an evaluator (a pool's ``map`` when it
  has one, so they run concurrently) and yields every result, the format failures included.
- :func:`resolve_device` and :func:`resolve_size` hold the "auto" rules (written once here).
- :func:`preflight` checks that a problem's evaluation fits the device's and the host's memory before anything
  allocates, through the sandbox's memory plan (``kbenv.sandbox.memplan``) when it is installed.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Iterator, Sequence

from kbenv.errors import UsageError
from kbenv.problems import get_problem
from kbenv.prompts import extract_code
from kbenv.sandbox.result import EvalRequest, EvalResult

try:  # the single memory plan of the sandbox (issue 12)
    from kbenv.sandbox.memplan import SIZES, MemoryPlanError
    from kbenv.sandbox.memplan import preflight as _memplan_preflight
except ImportError:  # pragma: no cover - a sandbox without a memory plan: nothing to check against
    _memplan_preflight = None
    SIZES = ("small", "full")

    class MemoryPlanError(ValueError):  # type: ignore[no-redef]
        """Stand-in for ``kbenv.sandbox.memplan.MemoryPlanError``: an evaluation that would not fit in memory."""

        def __init__(self, message: str, plan=None, fitting_size: str | None = None):
            super().__init__(message)
            self.plan, self.fitting_size = plan, fitting_size

__all__ = ["FORMAT_FAILURE_REASON", "SIZES", "MemoryPlanError", "Prepared", "device_type", "evaluate", "prepare",
           "preflight", "reply_text", "resolve_device", "resolve_size"]

FORMAT_FAILURE_REASON = "no ```python block defining class ModelNew was found in the reply"


def device_type(device: Any) -> str:
    """``"cuda"`` or ``"cpu"`` from a device string (``cuda:1``), a ``torch.device`` or an evaluator."""
    device = getattr(device, "device", device)
    name = device if isinstance(device, str) else getattr(device, "type", str(device))
    return "cuda" if name.startswith("cuda") else name


def resolve_device(device: str = "auto") -> str:
    """``auto`` becomes ``cuda`` when this machine sees a GPU, else ``cpu``.

    Raises:
        UsageError: ``cuda`` asked for on a machine without a visible CUDA GPU, or an unknown device.
    """
    import torch

    if device in (None, "", "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device_type(device) not in ("cuda", "cpu"):
        raise UsageError("--device", f"unknown device {device!r} (cpu, cuda or auto)")
    if device_type(device) == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device", f"{device} asked for, but this machine has no visible CUDA GPU "
                                     "(use --device cpu, or auto)")
    return device


def resolve_size(size: str | None, device: Any) -> str:
    """The size tier: ``auto`` (or None) is ``full`` on cuda and ``small`` on the CPU (the interpreter's sizes)."""
    if size in (None, "", "auto"):
        return "full" if device_type(device) == "cuda" else "small"
    return size


def preflight(problem_ids: Iterable[str], size: str, precision: str | None, device: str) -> list:
    """Refuse, before anything allocates, an evaluation that cannot fit the device's or the host's memory.

    Returns the memory plans (empty when the sandbox has no memory plan module).

    Raises:
        MemoryPlanError: a ``ValueError`` whose one-line message names the size that fits.
    """
    if _memplan_preflight is None:
        return []
    plans = []
    for pid in problem_ids:
        prob = get_problem(pid)
        plans.append(_memplan_preflight(prob, size, precision or prob.precision_default, device_type(device)))
    return plans


def largest_size(problem_id: str, precision: str | None, device: str) -> str | None:
    """The largest size tier whose memory plan fits ``device`` (under any memory cap), or None when none does;
    ``full`` when the sandbox has no memory plan module."""
    if _memplan_preflight is None:
        return "full"
    from kbenv.sandbox.memplan import SIZES, MemoryPlanError
    prob = get_problem(problem_id)
    for size in reversed(SIZES):
        try:
            _memplan_preflight(prob, size, precision or prob.precision_default, device_type(device))
            return size
        except MemoryPlanError:
            continue
    return None


def reply_text(reply: Any) -> str:
    """The text of a reply: a string, or the last message's content of a chat-format list (as TRL passes)."""
    if isinstance(reply, str):
        return reply
    if isinstance(reply, list) and reply and isinstance(reply[-1], dict):
        return str(reply[-1].get("content", ""))
    return "" if reply is None else str(reply)


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A reply made ready for evaluation.

    Attributes:
        reply: the reply text as received.
        code: the candidate source extracted from it, or None (a ``format`` failure).
        request: the request to evaluate (its ``candidate`` is the reply itself when no code was found, so that
            the result's ``candidate_sha256`` identifies what the model sent).
        result: the result already decided without an evaluation (a format failure), else None.
    """

    reply: str
    code: str | None
    request: EvalRequest
    result: EvalResult | None = None


def prepare(reply: Any, problem_id: str, *, size: str, device: Any, precision: str | None = None,
            reward_fn: str = "amdahl", profile: str | None = None) -> Prepared:
    """Turn one reply into a :class:`Prepared` action for ``problem_id`` (``size`` already resolved)."""
    text = reply_text(reply)
    code = extract_code(text)
    req = EvalRequest(problem=problem_id, candidate=code or text, size=size, precision=precision,
                      reward_fn=reward_fn, profile=profile)
    if code is not None:
        return Prepared(reply=text, code=code, request=req)
    prob = get_problem(problem_id)
    res = EvalResult.format_failure(req, prob, precision or prob.precision_default, device_type(device),
                                    FORMAT_FAILURE_REASON)
    return Prepared(reply=text, code=None, request=req, result=res)


def evaluate(prepared: Sequence[Prepared], evaluator) -> Iterator[tuple[int, EvalResult]]:
    """Yield ``(index, result)`` for every prepared action: decided ones first, then evaluations as they finish.

    Evaluations go through ``evaluator.map`` when it has one (concurrently, one per evaluator), else one by one
    through ``evaluator.evaluate``. An evaluator's own failure (a harness fault) raises from this iterator.
    """
    todo = []
    for i, p in enumerate(prepared):
        if p.result is not None:
            yield i, p.result
        else:
            todo.append(i)
    if not todo:
        return
    reqs = [prepared[i].request for i in todo]
    if hasattr(evaluator, "map"):
        for j, res in evaluator.map(reqs):
            yield todo[j], res
    else:
        for i, req in zip(todo, reqs):
            yield i, evaluator.evaluate(req)

"""Settings shared by the entry points (CLI, rollout config, env): the sandbox's per-phase deadlines, and how long
an evaluation's paired timing may run.

``kbenv eval --limit compile=60 --limit timing=120`` and ``RolloutConfig(limit=["compile=60"])`` both become
the sandbox Supervisor's ``limits={"compile_s": 60.0, "timing_s": 120.0}`` through :func:`parse_limits`;
``--timing-budget 1.5`` becomes its ``timing={"budget_s": 1.5}`` through :func:`timing_overrides`.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

from kbenv.errors import UsageError

#: Phases whose deadline a user may set, with the Supervisor's ``limits`` key for each.
LIMIT_PHASES = {"compile": "compile_s", "trial": "trial_s", "timing": "timing_s"}


def parse_limits(specs: Iterable[str] | Mapping[str, float] | None, flag: str = "--limit") -> dict[str, float]:
    """``["compile=60", "timing=120"]`` (or ``{"compile": 60}``) -> ``{"compile_s": 60.0, "timing_s": 120.0}``.

    A phase given twice keeps its last value. Keys already in Supervisor form (``compile_s``) are accepted.

    Raises:
        UsageError: a spec that is not ``PHASE=SECONDS``, an unknown phase, or seconds that are not a finite
            positive number (the message names ``flag``).
    """
    if not specs:
        return {}
    items = list(specs.items()) if isinstance(specs, Mapping) else []
    if not isinstance(specs, Mapping):
        for spec in specs:
            phase, sep, value = str(spec).partition("=")
            if not sep:
                raise UsageError(flag, f"{spec!r} is not PHASE=SECONDS (PHASE one of {', '.join(LIMIT_PHASES)})")
            items.append((phase.strip(), value.strip()))
    out: dict[str, float] = {}
    for phase, value in items:
        key = LIMIT_PHASES.get(phase, phase if phase in LIMIT_PHASES.values() else None)
        if key is None:
            raise UsageError(flag, f"unknown phase {phase!r} (one of {', '.join(LIMIT_PHASES)})")
        out[key] = _seconds(value, flag, f"{phase}={value!r}")
    return out


def _seconds(value, flag: str, shown: str) -> float:
    """``value`` as a finite number of seconds above 0, else a :class:`UsageError` naming ``flag`` and ``shown``."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise UsageError(flag, f"{shown}: seconds must be a number") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(flag, f"{shown}: seconds must be a finite number above 0")
    return seconds


def timing_overrides(budget_s: float | None, flag: str = "--timing-budget") -> dict[str, float]:
    """The Supervisor's ``timing`` overrides (:class:`~kbenv.sandbox.timing.TimingPlan`) for a timing budget in
    seconds: the paired rounds stop once the ratio's interval is tight or this much wall time has gone (3 s on cuda
    by default; the repeatability figures of the README were measured at that). Less is more evaluations per GPU-hour
    and noisier speedups; the rounds never stop before ``min_rounds``. ``None`` or 0: the default.

    Raises:
        UsageError: seconds that are not a finite number above 0.
    """
    if not budget_s:
        return {}
    return {"budget_s": _seconds(budget_s, flag, repr(budget_s))}

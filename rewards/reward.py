"""Reward functions: small named functions over a verdict, a speedup and a workload share.

Every function returns ``(reward, components)``; the components go into the evaluation result so a user can
see why a kernel scored what it scored. All of them are gated: a candidate that failed any check (including
the decoy and timing checks) gets exactly 0, whatever its speed.

- ``amdahl`` (default): ``gate * G`` with ``G = 1 / ((1 - s) + s / sigma)``, the paper's Eq. 1 end-to-end
  gain of a workload in which the problem's op family takes share ``s`` of the wall clock, and ``sigma`` the
  kernel's speedup over the faster of eager and torch.compile. Bounds: 0 for a failure; ``(0, 1/(1 - s)]`` for
  a verified kernel, so any verified kernel outranks any failure; 1 at ``sigma = 1`` (no change to the
  workload); below 1 for a kernel slower than the baseline (a regression); ``1/(1 - s)`` is the Amdahl
  ceiling an infinitely fast kernel reaches. With ``s = 0`` (the family does not occur in the workload) every
  verified kernel gets exactly 1: speed there buys the workload nothing.
- ``speedup``: ``gate * ln(sigma)``; bounds ``(-inf, inf)``.
- ``fast_p``: ``gate * [sigma > p]`` (KernelBench's fast_p for one problem); bounds ``{0, 1}``.

On the cpu device (Triton's interpreter) timings are not GPU figures: the sandbox passes ``sigma = 1`` to these
functions and keeps the measured figure in the result's ``speedup`` with ``speedup_meaningful = false``.

Harness faults never reach these functions: the sandbox raises instead of returning a result.
"""

from __future__ import annotations

import math


def speedup(baseline_ms: float, candidate_ms: float) -> float:
    """sigma = t_baseline / t_candidate (medians, same protocol, same device)."""
    if candidate_ms <= 0 or not math.isfinite(candidate_ms):
        raise ValueError(f"candidate time must be positive and finite, got {candidate_ms}")
    return baseline_ms / candidate_ms


def end_to_end_gain(share: float, sigma: float) -> float:
    """The paper's Eq. 1 for one op: 1 / ((1 - s) + s / sigma)."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must be in [0, 1], got {share}")
    return 1.0 / ((1.0 - share) + share / sigma)


def amdahl(gate: bool, sigma: float | None, share: float, **_) -> tuple[float, dict]:
    comps = {"gate": float(gate), "speedup": sigma, "share": share}
    if not gate or sigma is None:
        return 0.0, {**comps, "end_to_end_gain": None, "gain_ceiling": _ceiling(share)}
    g = end_to_end_gain(share, sigma)
    return g, {**comps, "end_to_end_gain": g, "gain_ceiling": _ceiling(share)}


def _ceiling(share: float) -> float | None:
    return None if share >= 1.0 else 1.0 / (1.0 - share)


def speedup_reward(gate: bool, sigma: float | None, **_) -> tuple[float, dict]:
    comps = {"gate": float(gate), "speedup": sigma}
    if not gate or sigma is None:
        return 0.0, comps
    return math.log(sigma), comps


def fast_p(gate: bool, sigma: float | None, p: float = 1.0, **_) -> tuple[float, dict]:
    comps = {"gate": float(gate), "speedup": sigma, "p": p}
    if not gate or sigma is None:
        return 0.0, comps
    return float(sigma > p), comps


REWARD_FUNCTIONS = {"amdahl": amdahl, "speedup": speedup_reward, "fast_p": fast_p}


def compute_reward(name: str, gate: bool, sigma: float | None, share: float = 1.0, p: float = 1.0):
    """Dispatch to a named reward function; unknown names raise (a configuration error, not a low reward)."""
    try:
        fn = REWARD_FUNCTIONS[name]
    except KeyError:
        raise ValueError(f"unknown reward function {name!r}; choose from {sorted(REWARD_FUNCTIONS)}") from None
    return fn(gate=gate, sigma=sigma, share=share, p=p)

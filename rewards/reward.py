"""Reward functions: small named functions over a verdict, a speedup and a workload share.

Every function returns a :class:`Reward` (it unpacks as ``(reward, components)``); the components go into the
evaluation result so a user can see why a kernel scored what it scored. All of them are gated: a candidate
that failed any check (including the decoy and timing checks) gets exactly 0, whatever its speed.

- ``amdahl`` (default): ``gate * G`` with ``G = 1 / ((1 - s) + s / sigma)``, the paper's Eq. 1 end-to-end
  gain of a workload in which the problem's op family takes share ``s`` of the wall clock
  (:mod:`kbenv.rewards.amdahl` defines ``s``), and ``sigma`` the kernel's speedup over the faster of eager and
  torch.compile. Bounds: 0 for a failure; ``(0, 1/(1 - s)]`` for a verified kernel, so any verified kernel
  outranks any failure; 1 at ``sigma = 1`` (no change to the workload); below 1 for a kernel slower than the
  baseline (a regression); ``1/(1 - s)`` is the Amdahl ceiling an infinitely fast kernel reaches. With
  ``s = 0`` (the family does not occur in the workload) every verified kernel gets exactly 1: speed there buys
  the workload nothing.
- ``speedup``: ``gate * ln(sigma)``; finite for any accepted sigma.
- ``fast_p``: ``gate * [sigma > p]`` (KernelBench's fast_p for one problem); ``{0, 1}``.

**Totality.** These functions never raise and never return a non-finite reward. A speedup that is None (not
measured), NaN, infinite, zero or negative, a share outside [0, 1] or non-finite, or a non-finite ``p`` is
*rejected*: the reward is 0 and ``Reward.rejected`` (also ``components["rejected"]``) says why. A non-finite or
non-positive time never becomes a speedup either: :func:`speedup` returns NaN for it, which the reward
functions reject. (The verifier's timing checks fail such a candidate before it gets here; this is the last
line.)

On the cpu device (Triton's interpreter) timings are not GPU figures: the sandbox passes ``sigma = 1`` to these
functions and keeps the measured figure in the result's ``speedup`` with ``speedup_meaningful = false``.

Harness faults never reach these functions: the sandbox raises instead of returning a result.
"""

from __future__ import annotations

import dataclasses
import math
import numbers


@dataclasses.dataclass(frozen=True)
class Reward:
    """One reward: ``value`` (finite), ``components`` (reported in the result's ``reward_components``) and
    ``rejected``: None, or why an input was refused (the value is then 0)."""

    value: float
    components: dict
    rejected: str | None = None

    def __iter__(self):  # unpacks as ``(reward, components)``
        return iter((self.value, self.components))

    def __getitem__(self, i: int):
        return (self.value, self.components)[i]


def _finite(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(float(x))


def speedup(baseline_ms: float, candidate_ms: float) -> float:
    """sigma = t_baseline / t_candidate (medians, same protocol, same device); NaN when either time is not a
    positive finite number (the reward functions reject NaN)."""
    if not (_finite(baseline_ms) and _finite(candidate_ms)) or baseline_ms <= 0 or candidate_ms <= 0:
        return math.nan
    s = baseline_ms / candidate_ms
    return s if math.isfinite(s) and s > 0 else math.nan


def end_to_end_gain(share: float, sigma: float) -> float:
    """The paper's Eq. 1 for one op: 1 / ((1 - s) + s / sigma). Raises on arguments outside its domain (a
    helper; the reward functions check first)."""
    if not (_finite(share) and 0.0 <= share <= 1.0):
        raise ValueError(f"share must be in [0, 1], got {share}")
    if not (_finite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be positive and finite, got {sigma}")
    return 1.0 / ((1.0 - share) + share / sigma)


def _sigma_problem(sigma) -> str | None:
    if sigma is None:
        return "no speedup was measured"
    if not _finite(sigma):
        return f"non-finite speedup {sigma!r}"
    if sigma <= 0:
        return f"non-positive speedup {sigma!r}"
    return None


def _reject(comps: dict, why: str) -> Reward:
    return Reward(0.0, {**comps, "rejected": why}, why)


def amdahl(gate: bool, sigma: float | None, share: float, **_) -> Reward:
    comps = {"gate": float(bool(gate)), "speedup": sigma, "share": share, "end_to_end_gain": None,
             "gain_ceiling": None}
    if not (_finite(share) and 0.0 <= share <= 1.0):
        return _reject(comps, f"share {share!r} is not in [0, 1]")
    comps["gain_ceiling"] = None if share >= 1.0 else 1.0 / (1.0 - share)
    if not gate:
        return Reward(0.0, comps)
    why = _sigma_problem(sigma)
    if why:
        return _reject(comps, why)
    g = end_to_end_gain(share, sigma)
    if not math.isfinite(g):  # sigma so small that s / sigma overflows
        return _reject(comps, f"end-to-end gain {g!r} is not finite")
    comps["end_to_end_gain"] = g
    return Reward(g, comps)


def speedup_reward(gate: bool, sigma: float | None, **_) -> Reward:
    comps = {"gate": float(bool(gate)), "speedup": sigma}
    if not gate:
        return Reward(0.0, comps)
    why = _sigma_problem(sigma)
    if why:
        return _reject(comps, why)
    return Reward(math.log(sigma), comps)


def fast_p(gate: bool, sigma: float | None, p: float = 1.0, **_) -> Reward:
    comps = {"gate": float(bool(gate)), "speedup": sigma, "p": p}
    if not _finite(p):
        return _reject(comps, f"non-finite threshold p {p!r}")
    if not gate:
        return Reward(0.0, comps)
    why = _sigma_problem(sigma)
    if why:
        return _reject(comps, why)
    return Reward(float(sigma > p), comps)


REWARD_FUNCTIONS = {"amdahl": amdahl, "speedup": speedup_reward, "fast_p": fast_p}


def compute_reward(name: str, gate: bool, sigma: float | None, share: float = 1.0, p: float = 1.0) -> Reward:
    """Dispatch to a named reward function; unknown names raise (a configuration error, not a low reward)."""
    try:
        fn = REWARD_FUNCTIONS[name]
    except KeyError:
        raise ValueError(f"unknown reward function {name!r}; choose from {sorted(REWARD_FUNCTIONS)}") from None
    return fn(gate=gate, sigma=sigma, share=share, p=p)

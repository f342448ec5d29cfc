"""The weight of the reward: which share ``s`` of a workload's GPU time a problem's op family governs.

This module is the one definition of ``s`` (Amdahl's law, the paper's Eq. 1 input). Every caller (the reward
path through :func:`share_for`, the profiler's :func:`kbenv.rewards.profiler.family_share`, the share table
``python -m kbenv.rewards.share_table``) goes through :func:`family_share_info`.

**Definition.** ``s`` is the op family's *own* share of the summed device time of one step of a workload,
as stated by a profile:

* ``measured``: the profile states the family's share. A measured profile (``families_complete: true``, the
  ``h200-*`` files) states every family, so a family it does not list takes no time in that workload and its
  share is 0.0 -- a measurement, not a guess.
* ``group``: the profile states only one figure for a group of families that includes this one (a ``+``-joined
  key, e.g. the paper's ``embedding+gather_scatter`` for DLRM training); that figure is an upper bound.
* ``absent``: the profile says nothing about the family (a paper row without a split for it): 0.0. Never the
  bucket's whole addressable or already-optimal fraction, which would credit one op with every other op's time.

**Defaults** (no profile named): the measured H200 training profiles, the most faithful kbenv has.

* ``dlrm``: every family is weighted by ``h200-dlrm-train`` (DLRM-Bench's problems are the kernels of that
  step); a family that does not run there (``gather_scatter``, ``normalization``, ``topk`` under the shipped
  classifier) gets ``s = 0``: a verified kernel earns exactly 1 whatever its speed.
* ``kernelbench`` (and external KernelBench checkouts): KernelBench has no workload of its own, so each family
  is weighted by the H200 training workload in which that family takes the largest share (``conv``,
  ``normalization``, ``pooling``, ``elementwise``: ResNet-50; ``matmul``, ``attention``, ``loss``, ``reduction``:
  GPT; ``embedding``, ``interaction``: DLRM; see :func:`default_profile_name`). A family that runs in none of
  them (``softmax``: fused into attention; ``scan``, ``topk``, ``gather_scatter``) gets ``s = 0`` (under GPT).

``python -m kbenv.rewards.share_table`` prints ``s`` per family under every shipped profile and the reward at
sigma = 0.5, 1, 2 and 4, so a trainer can see how strong the signal is before training on it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kbenv.rewards.classify import FAMILIES

PROFILES_DIR = Path(__file__).resolve().parent / "profiles"

# The workloads that may weight a family by default: measured H200 training steps.
DEFAULT_CANDIDATES = ("h200-dlrm-train", "h200-gpt-train", "h200-resnet50-train")
# A problem set with a workload of its own is weighted by that workload for every family.
HOME_PROFILES = {"dlrm": "h200-dlrm-train"}


class ProfileError(RuntimeError):
    """A profile cannot be trusted: too much unclassified time, no device time, or a malformed file."""


@dataclass(frozen=True)
class FamilyShare:
    """A family's share of one profile: ``share`` in [0, 1], ``status`` (``measured``/``group``/``absent``)
    and ``key``, the profile's ``families`` key it came from (None when the share is 0 by definition)."""

    share: float
    status: str
    key: str | None


@dataclass(frozen=True)
class Share:
    """``s`` for one problem: the share, how it is known, the profile it came from (None when given)."""

    share: float
    status: str
    profile: str | None

    def __iter__(self):  # unpacks as ``(share, status, profile_name)``, the sandbox's historical tuple
        return iter((self.share, self.status, self.profile))


def list_profiles() -> list[str]:
    """Names of the profiles shipped in ``PROFILES_DIR``."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.json"))


def load_profile(name_or_path: str | Path) -> dict:
    """Load a profile by name (``"h200-dlrm-train"``, looked up in ``PROFILES_DIR``) or by path."""
    p = Path(name_or_path)
    if not p.is_file():
        candidate = PROFILES_DIR / (str(name_or_path) if str(name_or_path).endswith(".json") else f"{name_or_path}.json")
        if not candidate.is_file():
            raise FileNotFoundError(f"no profile {str(name_or_path)!r}; shipped profiles: {list_profiles()}")
        p = candidate
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{p}: not valid JSON ({exc})") from exc
    for key in ("name", "buckets", "families", "addressable_fraction"):
        if key not in data:
            raise ProfileError(f"{p}: missing key {key!r}")
    return data


@lru_cache(maxsize=None)
def _shipped(name: str) -> dict:
    return load_profile(name)


def family_share_info(profile: dict, family: str) -> FamilyShare:
    """The share of ``profile``'s time that ops of ``family`` govern, and how it is known (the module
    docstring's definition)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; known: {FAMILIES}")
    fams: dict[str, float] = profile.get("families", {})
    if family in fams:
        return FamilyShare(float(fams[family]), "measured", family)
    for key, value in fams.items():
        if "+" in key and family in key.split("+"):
            return FamilyShare(float(value), "group", key)
    if profile.get("families_complete"):
        return FamilyShare(0.0, "measured", None)
    return FamilyShare(0.0, "absent", None)


def default_profile_name(problem_set: str, family: str) -> str:
    """The profile that weights ``family`` in ``problem_set`` when none is named (module docstring)."""
    if problem_set in HOME_PROFILES:
        return HOME_PROFILES[problem_set]
    best = max(DEFAULT_CANDIDATES, key=lambda n: (family_share_info(_shipped(n), family).share, n == "h200-gpt-train"))
    return best


def share_for(profile: str | dict | None, family: str, problem_set: str = "kernelbench") -> Share:
    """``s`` for a problem of ``family`` in ``problem_set`` under ``profile`` (a shipped name, a path, a loaded
    dict, or None for the set's default). Unpacks as ``(s, status, profile_name)``.

    A share outside [0, 1] or non-finite in a profile file is a malformed profile: :class:`ProfileError`.
    """
    if isinstance(profile, dict):
        prof = profile
    elif profile:
        prof = load_profile(profile)
    else:
        prof = _shipped(default_profile_name(problem_set, family))
    info = family_share_info(prof, family)
    if not (math.isfinite(info.share) and 0.0 <= info.share <= 1.0):
        raise ProfileError(f"profile {prof.get('name')!r}: share {info.share} for {family!r} is not in [0, 1]")
    return Share(info.share, info.status, prof.get("name"))


__all__ = ["PROFILES_DIR", "ProfileError", "FamilyShare", "Share", "list_profiles", "load_profile",
           "family_share_info", "default_profile_name", "share_for", "DEFAULT_CANDIDATES", "HOME_PROFILES"]

"""Which share ``s`` of a workload's wall clock a problem's op family governs (the paper's Eq. 1 input).

Default profiles are the paper's Table 3 rows until measured ones are chosen: ``kernelbench`` problems are
weighted by a transformer training step (``paper-a100-qwen14b-train``) and ``dlrm`` problems by a DLRM training
step (``paper-a100-dlrm-train``). A paper row only splits out a few families; for a family it does not split,
``share_for`` falls back to the bucket the family belongs to (the addressable fraction for addressable
families, the already-optimal share for GEMM, convolution and attention) and says so in ``status``: that is an
upper bound on the family's own share. A measured profile (``families_complete``) gives each family's own
share and no fallback is used.
"""

from __future__ import annotations

from kbenv.rewards.profiler import family_share_info, load_profile

DEFAULT_PROFILES = {"kernelbench": "paper-a100-qwen14b-train", "kernelbench-ext": "paper-a100-qwen14b-train",
                    "dlrm": "paper-a100-dlrm-train"}
ALREADY_OPTIMAL_FAMILIES = {"matmul", "conv", "attention"}


def share_for(profile: str | dict | None, family: str, problem_set: str = "kernelbench") -> tuple[float, str, str]:
    """Return ``(s, status, profile_name)`` for a family under a profile (a name, a path or a loaded dict)."""
    prof = profile if isinstance(profile, dict) else load_profile(profile or DEFAULT_PROFILES[problem_set])
    info = family_share_info(prof, family)
    if info.status != "absent":
        return info.share, info.status, prof["name"]
    buckets = prof.get("buckets", {})
    if family in ALREADY_OPTIMAL_FAMILIES:
        return float(buckets.get("already_optimal", 0.0)), "bucket:already_optimal", prof["name"]
    return float(prof.get("addressable_fraction", 0.0)), "bucket:addressable", prof["name"]

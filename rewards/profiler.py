"""Workload profiles: which share of a real workload's GPU time each op family and kernel bucket governs.

``profile_workload("dlrm", "train")`` builds a workload from :mod:`kbenv.problems.workloads`, runs ``warmup``
steps, then ``steps`` steps under ``torch.profiler`` (after one extra step that warms the profiler itself), and
attributes every CUDA kernel, memcpy and memset to the CPU op that launched it:

1. torch joins each device event to the innermost CPU op active at its launch through their shared correlation
   id and lists it in that op's ``FunctionEvent.kernels`` (this works in torch 2.11, where the events of our
   H200 run carried no usable ``linked_correlation_id``, and in 2.13); the device events themselves give the
   totals, and time listed under no op is kept with an unknown launcher;
2. from that op the profiler walks ``cpu_parent`` up to the *launching context*: the outermost region label
   (``kbenv::<family>``, ``Optimizer.step#...``) or else the outermost ``aten::`` op;
3. backward kernels run under an autograd node (``XBackward0``), often on the engine's own thread; the node's
   ``(sequence_nr, fwd_thread)`` names the forward op that created it, so backward kernels inherit the forward
   op's context (``EmbeddingBagBackward0`` -> ``aten::embedding_bag``, the interaction's ``BmmBackward0`` ->
   ``kbenv::interaction``); if no forward op is found, the outermost aten op inside the node is used.

Each kernel is then classified by :func:`kbenv.rewards.classify.classify_kernel` into a bucket and a family.
Shares are of the summed device time of all kernels, memcpys and memsets (idle gaps between kernels are not
in the denominator; ``gpu_busy_fraction`` reports kernel time over wall clock separately).

On CPU there are no kernels: ``device="cpu"`` profiles the self CPU time of aten ops instead, with the same
attribution and classifier. Such a profile says ``"device": "cpu"`` and ``"total_gpu_ms": None``; it exists so
that the pipeline runs in CI and is never a stand-in for a GPU profile.

Profiles are JSON files in ``rewards/profiles/``: measured ones (``h200-dlrm-train.json``) and the paper's
Table 3 rows (``paper-a100-dlrm-train.json``). :func:`family_share` gives the ``s`` of Amdahl's law for one
op family through the one definition in :mod:`kbenv.rewards.amdahl` (which also holds profile lookup, so the
reward path never imports this module's measurement code).
"""

from __future__ import annotations

import json
import math
import platform
import re
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch

from .amdahl import PROFILES_DIR, FamilyShare, ProfileError, family_share_info, list_profiles, load_profile
from .classify import ADDRESSABLE, BUCKETS, FAMILIES, UNCLASSIFIED, classify_kernel  # noqa: F401 (FAMILIES re-exported)

__all__ = [
    "PROFILES_DIR",
    "UNCLASSIFIED_BUDGET",
    "SCHEMA_VERSION",
    "ProfileError",
    "FamilyShare",
    "profile_workload",
    "profile_from_records",
    "records_from_events",
    "check_profile",
    "reclassify",
    "save_profile",
    "load_profile",
    "list_profiles",
    "family_share",
    "family_share_info",
    "device_slug",
]

UNCLASSIFIED_BUDGET = 0.005  # a profile whose unclassified share exceeds 0.5% of device time is an error
SCHEMA_VERSION = 1
TOP_KERNELS = 30
_MAX_NAME = 400
_DEVICE_ACTIVITIES = ("kernel", "gpu_memcpy", "gpu_memset")
UNKNOWN_FAMILY = "unknown"  # family key for unclassified kernels whose launching op names no family


# ---------------------------------------------------------------------------------------------------------------
# Attribution: device event -> launching context
# ---------------------------------------------------------------------------------------------------------------


def _is_label(name: str) -> bool:
    return name.startswith("kbenv::") or name.startswith("Optimizer.step#") or name.startswith("Optimizer.zero_grad#")


def _is_annotation_name(name: str) -> bool:
    return _is_label(name) or name.startswith("ProfilerStep")


def _is_annotation(evt: Any) -> bool:
    return getattr(evt, "scope", 0) == 7 or getattr(evt, "is_user_annotation", False) or _is_annotation_name(evt.name)


def _is_backward_node(evt: Any) -> bool:
    return getattr(evt, "scope", 0) == 1 or evt.name.startswith("autograd::engine::evaluate_function:")


class _Attributor:
    """Computes the launching context of CPU events (see the module docstring)."""

    def __init__(self, cpu_events: Sequence[Any]):
        self._memo: dict[int, str | None] = {}
        # Forward events by (sequence_nr, thread). Every op records the sequence number the *next* autograd node
        # will get, so ops that create no node (``num_batches_tracked.add_(1)``, ``targets.view(-1)``) record the
        # same number as the op after them; the counter moves on when the node is created, so the op that created
        # node M (or an op nested in it) is the *last* to start with M.
        self._forward: dict[tuple[int, int], Any] = {}
        for evt in sorted(cpu_events, key=lambda e: e.time_range.start):
            seq = getattr(evt, "sequence_nr", -1)
            if seq is None or seq < 0 or not evt.name.startswith("aten::"):
                continue
            if self._backward_node_of(evt) is not None:
                continue
            self._forward[(seq, evt.thread)] = evt

    @staticmethod
    def _backward_node_of(evt: Any) -> Any | None:
        node = evt
        while node is not None:
            if _is_backward_node(node):
                return node
            node = node.cpu_parent
        return None

    @staticmethod
    def _forward_context(evt: Any) -> str | None:
        label = aten = None
        node = evt
        while node is not None:
            if _is_label(node.name):
                label = node.name
            elif node.name.startswith("aten::"):
                aten = node.name
            node = node.cpu_parent
        return label or aten

    def context(self, evt: Any | None) -> str | None:
        if evt is None:
            return None
        key = id(evt)
        if key in self._memo:
            return self._memo[key]
        ctx: str | None
        bw = self._backward_node_of(evt)
        if bw is None:
            ctx = self._forward_context(evt)
        else:
            ctx = None
            seq = getattr(bw, "sequence_nr", -1)
            fwd_thread = getattr(bw, "fwd_thread", None)
            if seq is not None and seq >= 0 and fwd_thread is not None:
                fwd = self._forward.get((seq, fwd_thread))
                if fwd is not None:
                    ctx = self._forward_context(fwd)
            if ctx is None:  # outermost aten op inside the backward node
                node = evt
                while node is not None and node is not bw:
                    if node.name.startswith("aten::"):
                        ctx = node.name
                    node = node.cpu_parent
        self._memo[key] = ctx
        return ctx


def records_from_events(events: Iterable[Any], device: str = "cuda") -> tuple[list[tuple[str, str | None, float]], dict]:
    """Turn ``torch.profiler`` events into ``(kernel name, launching context, microseconds)`` records.

    ``device="cuda"``: one record per kernel / memcpy / memset. torch attaches each device event to the CPU op
    whose correlation id it carries (``FunctionEvent.kernels``); the records take the launching context from that
    op. The device events themselves give the totals: time not attached to any op (a launch outside every op)
    is kept as a record with context None, so nothing is lost. GPU-side copies of user annotations
    (``ProfilerStep*``, ``kbenv::...`` ranges, activity type ``gpu_user_annotation``) span kernels and are
    skipped. ``device="cpu"``: one record per ``aten::`` op with its self CPU time. Returns the records and a dict
    of diagnostics (skipped device events, unattributed time).
    """
    from torch.autograd import DeviceType

    events = list(events)
    cpu = [e for e in events if e.device_type == DeviceType.CPU and not getattr(e, "is_async", False)]
    attributor = _Attributor(cpu)
    records: list[tuple[str, str | None, float]] = []

    if device == "cpu":
        for e in cpu:
            if e.name.startswith("aten::"):
                us = float(e.self_cpu_time_total)
                if us > 0:
                    records.append((e.name, attributor.context(e), us))
        return records, {}

    annotation_names = {e.name for e in cpu if _is_annotation(e)}

    def skip_reason(e: Any) -> str | None:
        kind = getattr(e, "activity_type", None)
        if kind is not None and kind not in _DEVICE_ACTIVITIES:
            return str(kind)
        if getattr(e, "is_user_annotation", False) or e.name in annotation_names or _is_annotation_name(e.name):
            return "annotation"
        return None

    skipped: dict[str, int] = defaultdict(int)
    device_us: dict[str, float] = defaultdict(float)
    for e in events:
        if e.device_type == DeviceType.CPU:
            continue
        reason = skip_reason(e)
        if reason is not None:
            skipped[reason] += 1
            continue
        device_us[e.name] += float(e.time_range.end - e.time_range.start)

    attributed: dict[str, float] = defaultdict(float)
    for e in cpu:
        kernels = getattr(e, "kernels", None) or ()
        if not kernels:
            continue
        ctx = attributor.context(e)
        for k in kernels:
            if k.name not in device_us:  # an annotation copy, or a legacy per-op CUDA time
                continue
            records.append((k.name, ctx, float(k.duration)))
            attributed[k.name] += float(k.duration)

    unattributed_us = over_us = 0.0
    scale: dict[str, float] = {}
    for kname, total in device_us.items():
        rest = total - attributed.get(kname, 0.0)
        if rest > 1e-3:
            records.append((kname, None, rest))
            unattributed_us += rest
        elif rest < -1e-3:  # a device event listed under two ops: keep the device total, split pro rata
            over_us -= rest
            scale[kname] = total / attributed[kname]
    if scale:
        records = [(n, c, us * scale.get(n, 1.0)) for n, c, us in records]
    total_us = sum(device_us.values())
    stats = {
        "skipped_device_events": dict(skipped),
        "device_us": round(total_us, 3),
        "unattributed_fraction": round(unattributed_us / total_us, 6) if total_us else 0.0,
        "overattributed_fraction": round(over_us / total_us, 6) if total_us else 0.0,
    }
    return records, stats


# ---------------------------------------------------------------------------------------------------------------
# Records -> profile dict
# ---------------------------------------------------------------------------------------------------------------


def _shares(totals: dict[str, float], total: float) -> dict[str, float]:
    return {k: round(v / total, 6) for k, v in sorted(totals.items(), key=lambda kv: -kv[1]) if v > 0}


def _summarise(kernels: list[list[Any]], total_ms: float) -> dict:
    """Bucket / family shares and top kernels from rows ``[name, context, bucket, family, ms, launches]``."""
    buckets: dict[str, float] = {b: 0.0 for b in BUCKETS}
    families: dict[str, float] = defaultdict(float)
    nested: dict[str, dict[str, float]] = {b: defaultdict(float) for b in BUCKETS}
    top: dict[tuple[str, str, str], float] = defaultdict(float)
    for name, _ctx, bucket, family, ms, _n in kernels:
        fam = family or UNKNOWN_FAMILY
        buckets[bucket] += ms
        families[fam] += ms
        nested[bucket][fam] += ms
        top[(name, bucket, fam)] += ms
    top_rows = sorted(top.items(), key=lambda kv: -kv[1])[:TOP_KERNELS]
    return {
        "buckets": {b: round(buckets[b] / total_ms, 6) for b in BUCKETS},
        "families": _shares(families, total_ms),
        "bucket_families": {b: _shares(nested[b], total_ms) for b in BUCKETS},
        "addressable_fraction": round(buckets[ADDRESSABLE] / total_ms, 6),
        "unclassified_fraction": round(buckets[UNCLASSIFIED] / total_ms, 6),
        "top_kernels": [[n, b, f, round(ms / total_ms, 6)] for (n, b, f), ms in top_rows],
    }


def check_profile(profile: dict, max_unclassified: float = UNCLASSIFIED_BUDGET) -> None:
    """Raise :class:`ProfileError` when a measured profile's unclassified share exceeds ``max_unclassified``."""
    frac = profile.get("unclassified_fraction")
    if frac is None or frac <= max_unclassified:
        return
    offenders = [row for row in profile.get("kernels", []) if row[2] == UNCLASSIFIED][:10]
    total = profile.get("total_ms") or 1.0
    listing = "\n".join(f"  {row[4] / total:7.3%}  {row[0][:160]}  (launched by {row[1]})" for row in offenders)
    raise ProfileError(
        f"profile {profile.get('name')!r}: {frac:.3%} of device time is unclassified (budget "
        f"{max_unclassified:.2%}). Add rules to kbenv.rewards.classify for these kernels:\n{listing}"
    )


def profile_from_records(
    records: Iterable[tuple[str, str | None, float]],
    *,
    steps: int = 1,
    name: str | None = None,
    device: str = "cuda",
    meta: dict | None = None,
    max_unclassified: float = UNCLASSIFIED_BUDGET,
    allow_unclassified: bool = False,
) -> dict:
    """Build a profile dict from ``(kernel name, launching context, microseconds)`` records over ``steps`` steps.

    Raises :class:`ProfileError` when there is no device time, or when the unclassified share exceeds
    ``max_unclassified`` unless ``allow_unclassified`` (then the profile carries a warning instead).
    """
    agg: dict[tuple[str, str | None], list[float]] = defaultdict(lambda: [0.0, 0])
    for kname, ctx, us in records:
        row = agg[(kname[:_MAX_NAME], ctx)]
        row[0] += us
        row[1] += 1
    total_us = sum(v[0] for v in agg.values())
    if not total_us > 0:
        raise ProfileError(f"profile {name!r}: no {'kernel' if device != 'cpu' else 'aten op'} time was recorded")
    kernels = []
    for (kname, ctx), (us, n) in sorted(agg.items(), key=lambda kv: -kv[1][0]):
        bucket, family = classify_kernel(kname, ctx)
        kernels.append([kname, ctx, bucket, family, round(us / 1000.0 / steps, 9), round(n / steps, 3)])
    # Shares are taken against the sum of the stored rows, so a profile's shares can be recomputed exactly
    # from its own file (reclassify).
    total_ms = sum(row[4] for row in kernels)
    profile: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "name": name,
        "source": "measured",
        "device": "cpu" if device == "cpu" else "cuda",
        "time_basis": (
            "self CPU time of aten ops (NOT a GPU profile)"
            if device == "cpu"
            else "summed CUDA kernel + memcpy + memset time"
        ),
        **(meta or {}),
        "steps": steps,
        "total_ms": round(total_ms, 6),
        "total_gpu_ms": None if device == "cpu" else round(total_ms, 6),
        "launches_per_step": round(sum(v[1] for v in agg.values()) / steps, 3),
        "families_complete": True,
        **_summarise(kernels, total_ms),
        "kernels": kernels,
    }
    if profile["unclassified_fraction"] > max_unclassified:
        if not allow_unclassified:
            check_profile(profile, max_unclassified)
        msg = (
            f"profile {name!r}: {profile['unclassified_fraction']:.3%} of device time is unclassified "
            f"(budget {max_unclassified:.2%}); written anyway because allow_unclassified=True"
        )
        warnings.warn(msg, stacklevel=2)
        profile["warnings"] = [msg]
    return profile


def reclassify(profile: dict, **kwargs: Any) -> dict:
    """Recompute a measured profile's shares from its stored ``kernels`` with the current classifier (kernel
    names drift between torch / CUDA versions; the measurement does not need to be repeated)."""
    if profile.get("source") != "measured" or "kernels" not in profile:
        raise ProfileError(f"profile {profile.get('name')!r} has no stored kernels to reclassify")
    steps = 1
    records = [(row[0], row[1], row[4] * 1000.0) for row in profile["kernels"]]
    meta_keys = {"schema", "name", "source", "device", "time_basis", "steps", "total_ms", "total_gpu_ms",
                 "launches_per_step", "families_complete", "buckets", "families", "bucket_families",
                 "addressable_fraction", "unclassified_fraction", "top_kernels", "kernels", "warnings"}  # fmt: skip
    meta = {k: v for k, v in profile.items() if k not in meta_keys}
    new = profile_from_records(
        records, steps=steps, name=profile.get("name"), device=profile.get("device", "cuda"), meta=meta, **kwargs
    )
    # Launch counts and the step count are properties of the measurement, not of the classifier.
    launches = {(row[0], row[1]): row[5] for row in profile["kernels"]}
    for row in new["kernels"]:
        row[5] = launches.get((row[0], row[1]), row[5])
    new["steps"] = profile.get("steps", steps)
    new["launches_per_step"] = profile.get("launches_per_step", new["launches_per_step"])
    return new


# ---------------------------------------------------------------------------------------------------------------
# Running a workload under the profiler
# ---------------------------------------------------------------------------------------------------------------


def device_slug(device_name: str) -> str:
    """Short lowercase device tag for file names: "NVIDIA H200" -> "h200", "NVIDIA A100-SXM4-80GB" -> "a100"."""
    s = device_name.lower().replace("nvidia", " ").replace("geforce", " ").replace("tesla", " ")
    tokens = [t for t in re.split(r"[^a-z0-9]+", s) if t]
    return tokens[0] if tokens else "gpu"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def profile_workload(
    name: str,
    mode: str,
    device: str = "cuda",
    warmup: int = 5,
    steps: int = 10,
    size: str = "full",
    *,
    dtype: torch.dtype | str | None = None,
    profile_name: str | None = None,
    max_unclassified: float = UNCLASSIFIED_BUDGET,
    allow_unclassified: bool = False,
) -> dict:
    """Profile one workload (``"dlrm"``, ``"resnet50"``, ``"gpt"``) in ``mode`` (``"train"`` or ``"infer"``).

    Runs ``warmup`` unprofiled steps, times ``steps`` steps without the profiler (``wall_ms_per_step``), then
    profiles ``steps`` steps (after one step that warms the profiler up) and returns the profile dict:
    ``name, workload, mode, size, device, device_name, torch, dtype, total_gpu_ms (per step; None on CPU),
    total_ms, wall_ms_per_step, gpu_busy_fraction, buckets {bucket: share}, families {family: share},
    bucket_families, addressable_fraction, unclassified_fraction, top_kernels [[name, bucket, family, share]...],
    kernels [[name, launching op, bucket, family, ms per step, launches per step]...]``.

    ``dtype`` defaults to the workload's ``DEFAULT_DTYPES`` entry (fp32 for DLRM, bf16 otherwise) on CUDA and to
    fp32 on CPU. Raises :class:`ProfileError` when more than ``max_unclassified`` of the time is unclassified
    unless ``allow_unclassified`` (then the profile carries a warning).
    """
    from torch.profiler import ProfilerActivity, profile, schedule

    from kbenv.problems.workloads import DEFAULT_DTYPES, WORKLOADS

    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}; known: {sorted(WORKLOADS)}")
    if steps < 1:
        raise ValueError("steps must be >= 1")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ProfileError("device='cuda' requested but CUDA is not available; use device='cpu' for a CPU profile")
    if dtype is None:
        dtype = DEFAULT_DTYPES[name] if dev.type == "cuda" else torch.float32

    step_fn, description = WORKLOADS[name](mode, dev, dtype, size=size)
    for _ in range(warmup):
        step_fn()
    _sync(dev)

    t0 = time.perf_counter()
    for _ in range(steps):
        step_fn()
    _sync(dev)
    wall_ms = (time.perf_counter() - t0) * 1000.0 / steps

    activities = [ProfilerActivity.CPU]
    if dev.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(
        activities=activities,
        schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
        acc_events=True,
    ) as prof:
        for _ in range(steps + 1):
            step_fn()
            _sync(dev)
            prof.step()
    records, stats = records_from_events(prof.events(), "cpu" if dev.type == "cpu" else "cuda")

    if dev.type == "cuda":
        device_name = torch.cuda.get_device_name(dev)
        slug = device_slug(device_name)
        versions = {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
        }
    else:
        device_name = platform.processor() or platform.machine() or "cpu"
        slug = "cpu"
        versions = {"torch": torch.__version__}
    default_name = f"{slug}-{name}-{mode}" + ("" if size == "full" else f"-{size}")
    meta = {
        "workload": name,
        "mode": mode,
        "size": size,
        "device_name": device_name,
        **versions,
        "dtype": description.get("dtype"),
        "warmup": warmup,
        "wall_ms_per_step": round(wall_ms, 4),
        "workload_config": description,
        "attribution": stats,
    }
    prof_dict = profile_from_records(
        records,
        steps=steps,
        name=profile_name or default_name,
        device="cpu" if dev.type == "cpu" else "cuda",
        meta=meta,
        max_unclassified=max_unclassified,
        allow_unclassified=allow_unclassified,
    )
    if dev.type == "cuda":
        prof_dict["gpu_busy_fraction"] = round(prof_dict["total_ms"] / wall_ms, 4) if wall_ms > 0 else None
    else:
        prof_dict["notes"] = (
            "CPU profile (self time of aten ops, Triton-free eager CPU kernels): exercises the profiling pipeline; "
            "its shares say nothing about GPU time."
        )
    return prof_dict


# ---------------------------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------------------------


def save_profile(profile: dict, path: str | Path | None = None, *, max_unclassified: float = UNCLASSIFIED_BUDGET) -> Path:
    """Write ``profile`` as JSON to ``path`` (default ``PROFILES_DIR/<name>.json``) and return the path.

    A measured profile over the unclassified budget is refused unless it was built with
    ``allow_unclassified=True`` (it then carries ``warnings``)."""
    if not profile.get("warnings"):
        check_profile(profile, max_unclassified)
    if path is None:
        if not profile.get("name"):
            raise ValueError("profile has no name; pass a path")
        path = PROFILES_DIR / f"{profile['name']}.json"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(profile, indent=1, sort_keys=False) + "\n")
    return path


# ---------------------------------------------------------------------------------------------------------------
# Amdahl's s for one op family
# ---------------------------------------------------------------------------------------------------------------


def family_share(profile: dict, family: str, *, strict: bool = False) -> float:
    """``s`` for Eq. 1: the share of the workload's time governed by ops of ``family`` (the definition is
    :func:`kbenv.rewards.amdahl.family_share_info`). With ``strict=True`` anything but a measured share raises
    :class:`ProfileError` instead of returning an upper bound (``group``) or 0.0 (``absent``)."""
    info = family_share_info(profile, family)
    if strict and info.status != "measured":
        raise ProfileError(
            f"profile {profile.get('name')!r} has no share of its own for family {family!r} ({info.status})"
        )
    if not (0.0 <= info.share <= 1.0) or math.isnan(info.share):
        raise ProfileError(f"profile {profile.get('name')!r}: share {info.share} for {family!r} is not in [0, 1]")
    return info.share


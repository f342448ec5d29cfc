"""The verdict: every check over one evaluation's observed facts, and the failure category that wins.

:func:`judge` is a pure function. The sandbox gathers the facts (trusted reference outputs and inputs, the
candidate's returned outputs, raw timings and observations from its worker) and calls it on the trusted
side; nothing here trusts a verdict, flag or figure the candidate could have written, except where noted
as a "worker fact" (reported by harness code loaded before the candidate and cross-checked where possible).
"""

from __future__ import annotations

import dataclasses
import math

from kbenv.rewards import checks as C
from kbenv.rewards.invariants import TIE_TOLERANT, check_invariants

# Which failure category is reported when several checks fail: the most basic fault first.
CATEGORY_ORDER = (
    "wrong_type", "wrong_shape", "nonfinite", "unwritten", "inaccurate", "invariant", "aliasing", "mutation",
    "nondeterministic", "distribution", "decoy", "timing_tamper", "timing_escape", "replay", "impossible_speed",
)

DECOY_MIN_SHARE = 0.2  # custom kernels must account for at least this share of the candidate's GPU time


@dataclasses.dataclass
class Trial:
    """One correctness trial's facts.

    ``reference`` and ``inputs`` were computed on the trusted side; ``outputs_a``/``outputs_b`` are the
    candidate's outputs from two runs on the same inputs with memory poisoned by ``pattern_a``/``pattern_b``
    (``outputs_b`` is None when only one run was made); ``out_meta`` are worker facts per output (``type``,
    ``aliases_input``); ``input_samples`` are (expected, got) values of the inputs at secret positions after
    the call.
    """

    domain: str
    inputs: list
    reference: list
    outputs_a: list
    outputs_b: list | None
    out_meta: list
    pattern_a: int
    pattern_b: int
    input_samples: tuple | None = None


@dataclasses.dataclass
class Verdict:
    checks: list
    correct: bool
    category: str | None
    reason: str

    @property
    def passed(self) -> bool:
        return self.category is None


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def correctness_checks(trial: Trial, precision: str, invariants, tolerance=None, seed: int = 0) -> list:
    out: list[C.Check] = []
    refs, outs = _as_list(trial.reference), _as_list(trial.outputs_a)
    if len(outs) != len(refs):
        return [C.Check("output_count", False, len(outs), len(refs),
                        f"returned {len(outs)} outputs, the reference returns {len(refs)}", category="wrong_shape")]
    tie_tolerant = {s.get("output", 1 if s["kind"] == "sorted_topk" else 0)
                    for s in invariants if s["kind"] in TIE_TOLERANT}
    structural_ok = True
    for i, (r, o) in enumerate(zip(refs, outs)):
        meta = trial.out_meta[i] if i < len(trial.out_meta) else {}
        st = C.check_structure(r, o, meta, i)
        out += st
        if not all(c.passed for c in st):
            structural_ok = False
            continue
        out.append(C.Check(f"aliasing[{i}]", not meta.get("aliases_input", False),
                           detail="output shares memory with an input" if meta.get("aliases_input") else "",
                           category="aliasing"))
        out.append(C.check_finite(r, o, i))
        if not (r.is_floating_point() is False and i in tie_tolerant):
            out += C.check_error(r, o, precision, i, tolerance)
        ob = _as_list(trial.outputs_b)[i] if trial.outputs_b is not None else None
        out += C.check_written(r, o, ob, trial.pattern_a, trial.pattern_b, i)
        if ob is not None:
            out.append(C.check_deterministic(o, ob, r, precision, i, tolerance))
    if structural_ok and invariants:
        out += check_invariants(invariants, trial.inputs, outs, precision, seed)
    if trial.input_samples is not None:
        exp, got = trial.input_samples
        out.append(C.check_sampled(exp, got, 0.0, precision, "inputs_unchanged", "mutation"))
    return out


def judge(trials: list[Trial], precision: str, invariants=(), tolerance=None, timing: dict | None = None,
          decoy: dict | None = None) -> Verdict:
    """Run every check and pick the verdict.

    Args:
        trials: correctness trials; the first uses the problem's official input domain.
        precision: ``fp32``, ``bf16`` or ``fp16`` (selects thresholds).
        invariants: the problem's invariant specs.
        tolerance: the problem's threshold overrides.
        timing: timing facts (see :func:`timing_checks`), or None when the candidate was not timed.
        decoy: decoy facts (see :func:`decoy_checks`), or None when not measured.

    Returns:
        The verdict: ``correct`` is true when every correctness check of every trial passed; ``category``
        is the first failing category in ``CATEGORY_ORDER`` (``distribution`` when only trials on a
        broader input domain failed), or None when everything passed.
    """
    per_trial = [(trial.domain, correctness_checks(trial, precision, invariants, tolerance, seed=t_i))
                 for t_i, trial in enumerate(trials)]
    return judge_checks(per_trial, timing=timing, decoy=decoy)


def judge_checks(per_trial: list[tuple[str, list]], timing: dict | None = None,
                 decoy: dict | None = None) -> Verdict:
    """:func:`judge` over correctness checks already computed per trial (``(domain, checks)`` pairs), so a
    caller can check each trial as it arrives and free its tensors (full-size outputs reach 8 GiB)."""
    all_checks: list[C.Check] = []
    official_failed: list[C.Check] = []
    broad_failed: list[C.Check] = []
    for t_i, (domain, cs) in enumerate(per_trial):
        for c in cs:
            if not c.name.startswith("trial"):
                c.name = f"trial{t_i}({domain}):{c.name}"
        all_checks += cs
        failed = [c for c in cs if not c.passed]
        (official_failed if domain == "default" else broad_failed).extend(failed)
    correct = not official_failed and not broad_failed
    if decoy is not None:
        all_checks += decoy_checks(decoy)
    if timing is not None:
        all_checks += timing_checks(timing)
    failed = [c for c in all_checks if not c.passed]
    if not failed:
        return Verdict(all_checks, True, None, "every check passed")
    if official_failed:
        first = _first(official_failed)
    elif broad_failed:
        c = _first(broad_failed)
        return Verdict(all_checks, False, "distribution",
                       f"right on the official inputs but wrong on a broader domain: {c.name} {_fmt(c)}")
    else:
        first = _first(failed)
    return Verdict(all_checks, correct, first.category, f"{first.name} failed: {_fmt(first)}")


def _first(failed):
    return min(failed, key=lambda c: CATEGORY_ORDER.index(c.category) if c.category in CATEGORY_ORDER else 99)


def _fmt(c: C.Check) -> str:
    parts = []
    if c.value is not None:
        parts.append(f"value {c.value:.4g}" if isinstance(c.value, float) else f"value {c.value}")
    if c.threshold is not None:
        parts.append(f"threshold {c.threshold:.4g}" if isinstance(c.threshold, float) else f"threshold {c.threshold}")
    s = ", ".join(parts)
    return f"{s}; {c.detail}" if c.detail else s


def decoy_checks(decoy: dict) -> list[C.Check]:
    """Custom kernels must produce the output.

    ``decoy`` holds ``custom_launches`` (Triton/CUDA launches by candidate kernels in one forward, a worker
    fact), ``noop_correct`` (whether the output computed with every Triton launch suppressed still passed the
    correctness checks, judged on the trusted side; None when not measured) and ``custom_gpu_share`` (custom
    kernels' share of the candidate's GPU kernel time from the profiler; None on cpu).
    """
    out = [C.Check("custom_kernels_launched", decoy.get("custom_launches", 0) > 0,
                   float(decoy.get("custom_launches", 0)), 1.0,
                   "Triton/CUDA kernels launched by the candidate in one forward", category="decoy")]
    if decoy.get("noop_correct") is not None:
        out.append(C.Check("output_depends_on_custom_kernels", not decoy["noop_correct"], None, None,
                           "with the candidate's kernels replaced by no-ops the output "
                           + ("was still correct" if decoy["noop_correct"] else "changed"), category="decoy"))
    share = decoy.get("custom_gpu_share")
    if share is not None:
        out.append(C.Check("custom_kernel_time_share", share >= DECOY_MIN_SHARE, share, DECOY_MIN_SHARE,
                           "custom kernels' share of the candidate's GPU kernel time", category="decoy"))
    return out


def timing_checks(t: dict) -> list[C.Check]:
    """Checks on the timing phase.

    Keys of ``t`` (worker facts unless noted): ``timers_intact`` (the harness's captured timer functions are
    still the ones installed), ``l2_persisting_bytes`` (persisting-L2 limit after the run; None on cpu),
    ``threads_left`` (threads the candidate left running), ``reported_total_ms`` and ``wall_ms`` (the
    supervisor's own clock around the timing phase, trusted), ``replay_checks`` (list of trusted-side
    :class:`Check` objects on sampled timed outputs), ``median_ms`` and ``floor_ms`` (trusted, from the
    manifest; None when not applicable).
    """
    out = [C.Check("timers_intact", bool(t.get("timers_intact", False)), detail=t.get("timers_detail", ""),
                   category="timing_tamper")]
    l2 = t.get("l2_persisting_bytes")
    if l2 is not None:
        out.append(C.Check("persisting_l2_reset", l2 == 0, float(l2), 0.0,
                           "persisting-L2 limit the candidate left set", category="timing_tamper"))
    threads = t.get("threads_left", 0)
    out.append(C.Check("no_background_threads", threads == 0, float(threads), 0.0,
                       "threads the candidate started that were alive after its forward", category="timing_escape"))
    rep, wall = t.get("reported_total_ms"), t.get("wall_ms")
    if rep is not None and wall is not None:
        out.append(C.Check("wall_clock_bound", rep <= wall * 1.02 + 1.0, rep, wall,
                           "reported sum of trial times against the supervisor's wall clock (ms)",
                           category="timing_tamper"))
    for c in t.get("replay_checks", []):
        out.append(c)
    floor = t.get("floor_ms")
    med = t.get("median_ms")
    if floor is not None and med is not None:
        out.append(C.Check("above_physical_floor", med >= floor, med, floor,
                           "median time against min bytes / peak bandwidth and FLOPs / peak rate (ms)",
                           category="impossible_speed"))
    if med is not None and (not math.isfinite(med) or med <= 0):
        out.append(C.Check("positive_time", False, med, 0.0, "a non-positive or non-finite time",
                           category="timing_tamper"))
    return out


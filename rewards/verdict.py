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
            out += C.check_slices(r, o, precision, i, tolerance)  # every row/column on its own scale too
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


def trial_errors(per_trial: list[tuple[str, list]], domain: str = "default") -> dict[int, float]:
    """Per output index: the largest relative Frobenius error the correctness trials of ``domain`` measured
    (the ``rel_frobenius[i]`` checks of :func:`kbenv.rewards.checks.check_error`); an output judged exactly
    (integers) has none. The timing phase holds timed outputs to these (``check_timed_output``)."""
    out: dict[int, float] = {}
    for dom, checks in per_trial:
        if dom != domain:
            continue
        for c in checks:
            if c.name.startswith("rel_frobenius[") and c.name.endswith("]") and c.value is not None:
                i = int(c.name[len("rel_frobenius["):-1])
                out[i] = max(out.get(i, 0.0), float(c.value))
    return out


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
        if c.category == "mutation":  # writing into an input is that, on whatever domain it shows
            return Verdict(all_checks, False, "mutation", f"{c.name} failed: {_fmt(c)}")
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
    """Custom kernels must produce the output (every fact observed by the supervisor, none by the candidate).

    ``decoy`` holds ``custom_kernels`` (kernels the supervisor's own rewrite found in the source: ``@triton.jit``
    functions and ``__global__`` CUDA functions), ``noop_correct`` (whether the output of the source with every
    such kernel's writes removed, run in a fresh executor, still passed the correctness checks; None when there
    was nothing to rewrite, or no output to judge) and ``noop_failure`` (the category, when the no-op run
    returned no output: it raised, crashed, hung, ran out of memory or claimed a wrong shape or type).

    Only a judged output is evidence that the kernels produce it. A no-op run that returns none shows only that
    the candidate's host code noticed its kernels did nothing, which a candidate whose output is torch's can do
    on purpose (a kernel that writes a sentinel, checked before returning): that is a ``decoy`` too. An honest
    kernel's no-op run returns the output its kernels did not write, which fails the checks.
    """
    n = int(decoy.get("custom_kernels", 0) or 0)
    out = [C.Check("custom_kernels_defined", n > 0, float(n), 1.0,
                   "Triton/CUDA kernels the supervisor found in the candidate's source", category="decoy")]
    if decoy.get("noop_failure"):
        out.append(C.Check("output_depends_on_custom_kernels", False, None, None,
                           f"with the candidate's kernels made no-ops it returned no output to judge "
                           f"({decoy['noop_failure']}): its host code stops when its kernels do nothing, so "
                           f"that the kernels produce the output is not observed", category="decoy"))
    elif decoy.get("noop_correct") is not None:
        out.append(C.Check("output_depends_on_custom_kernels", not decoy["noop_correct"], None, None,
                           "with the candidate's kernels made no-ops the output "
                           + ("was still correct" if decoy["noop_correct"] else "changed"), category="decoy"))
    return out


def timing_checks(t: dict) -> list[C.Check]:
    """Checks on the timing phase, all over facts the supervisor observed itself.

    Keys of ``t``: ``median_ms`` (the candidate's median per-call time on the supervisor's clock, fenced),
    ``typical_ms`` (the time its speedup is paid on, ``kbenv.sandbox.timing.typical_time``; the median where
    absent), ``floor_ms`` (the physical floor: minimum bytes / peak bandwidth, and FLOPs / peak rate at full size;
    None when not applicable), ``replay_checks`` (trusted-side :class:`Check` objects on timed calls' outputs and
    inputs, chosen after each block) and ``speedup`` (the paired ratio; it must be finite and positive). Both
    times must be above the floor: the lower of them is checked.
    """
    out = list(t.get("replay_checks", []))
    med, floor = t.get("median_ms"), t.get("floor_ms")
    typ = t.get("typical_ms", med)
    if med is None or not math.isfinite(med) or med <= 0 or typ is None or not math.isfinite(typ) or typ <= 0:
        out.append(C.Check("positive_time", False, med, 0.0, "a non-positive or non-finite time",
                           category="impossible_speed"))
    elif floor is not None:
        low = min(med, typ)
        out.append(C.Check("above_physical_floor", low >= floor, low, floor,
                           "the lower of the median and typical times against min bytes / peak bandwidth and "
                           "FLOPs / peak rate (ms)", category="impossible_speed"))
    sp = t.get("speedup")
    if "speedup" in t and (sp is None or not math.isfinite(sp) or sp <= 0):
        out.append(C.Check("finite_speedup", False, sp, None, "the paired speedup is not a finite positive number",
                           category="impossible_speed"))
    return out

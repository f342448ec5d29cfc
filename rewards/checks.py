"""Correctness checks: pure functions over the trusted reference and the candidate's returned outputs.

Every check returns a :class:`Check` with the figure it measured and the threshold it used, so a user can see
why a candidate passed or failed. None of these functions ever runs candidate code: the outputs they receive
are plain tensors rebuilt from bytes on the trusted side.

Thresholds (``tolerances``):

=========  ==========================  ===========================
precision  relative Frobenius error    max error / max |y|
=========  ==========================  ===========================
bf16       < 2e-2 (the paper's)        < 5e-2 (the paper's)
fp16       < 1e-2                      < 2.5e-2
fp32       < 1e-4                      < 1e-3
=========  ==========================  ===========================

Per slice (:func:`check_slices`, every slice along every axis of the output): relative Frobenius error below
the ``max_rel`` column, so light rows and columns are held to their own scale and not only to the global one.

fp32 is tight on purpose: an fp32 problem asks for fp32 arithmetic, so bf16 shortcuts inside an fp32 kernel
(reward hack O9) fail it; a policy that wants tensor cores should target the bf16 precision. TF32 is closer: on
the official inputs of KernelBench's matmuls it stays inside 1e-4, so there the fp32 contract holds default-domain
outputs to the problem's own measured TF32 error (``rewards/precision.py``).
"""

from __future__ import annotations

import dataclasses
import math

import torch

TOLERANCES = {
    "bf16": {"rel_frobenius": 2e-2, "max_rel": 5e-2},
    "fp16": {"rel_frobenius": 1e-2, "max_rel": 2.5e-2},
    "fp32": {"rel_frobenius": 1e-4, "max_rel": 1e-3},
}
# Invariants are checked on outputs rounded to the precision, so their tolerance is looser than the error
# thresholds at low precision.
INVARIANT_TOLERANCE = {"bf16": 2e-2, "fp16": 1e-2, "fp32": 1e-3}

_CHUNK = 1 << 26  # elements per chunk when reducing big tensors (bounds the temporaries: 256 MiB in fp32)


@dataclasses.dataclass
class Check:
    """One named check with its figure, threshold and the failure category it maps to."""

    name: str
    passed: bool
    value: float | None = None
    threshold: float | None = None
    detail: str = ""
    category: str | None = None  # category when this check fails

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for k in ("value", "threshold"):
            v = d[k]
            if isinstance(v, float) and not math.isfinite(v):
                d[k] = repr(v)
        return d


def tolerances(precision: str, override: dict | None = None) -> dict:
    tol = dict(TOLERANCES[precision])
    for k, v in (override or {}).get(precision, {}).items():
        tol[k] = float(v)
    return tol


def _flat_chunks(t: torch.Tensor):
    flat = t.reshape(-1)
    for i in range(0, flat.numel(), _CHUNK):
        yield flat[i:i + _CHUNK]


def _work_dtype(t: torch.Tensor) -> torch.dtype:
    """At least fp32 for arithmetic on outputs (bf16/fp16 differences would round); fp64 stays fp64."""
    return torch.promote_types(t.dtype, torch.float32) if t.is_floating_point() else torch.float64


def error_figures(ref: torch.Tensor, out: torch.Tensor) -> dict:
    """Relative Frobenius and max-normalised errors, chunk by chunk: differences in fp32 (or wider), sums
    accumulated in fp64.

    Non-finite positions are excluded here (``check_finite`` judges them). Returns ``rel_frobenius``,
    ``max_rel``, ``ref_norm``, ``ref_max_abs``, ``max_abs_err``.
    """
    # Accumulated on the tensors' device and read back once (a host sync per chunk would dominate on a GPU).
    acc = torch.zeros(4, dtype=torch.float64, device=ref.device)  # sq_err, sq_ref, max_err, max_ref
    wd = torch.promote_types(_work_dtype(ref), _work_dtype(out))
    for r, o in zip(_flat_chunks(ref), _flat_chunks(out)):
        r, o = r.to(wd), o.to(wd)
        ok = torch.isfinite(r) & torch.isfinite(o)
        r = torch.where(ok, r, 0.0)
        d = torch.where(ok, o - r, 0.0).abs_()
        acc[0] += torch.dot(d, d).double()
        acc[1] += torch.dot(r, r).double()
        if d.numel():
            acc[2] = torch.maximum(acc[2], d.max().double())
            acc[3] = torch.maximum(acc[3], r.abs_().max().double())
    sq_err, sq_ref, max_err, max_ref = acc.tolist()
    ref_norm = math.sqrt(sq_ref)
    err_norm = math.sqrt(sq_err)
    rel_f = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else math.inf)
    max_rel = max_err / max_ref if max_ref > 0 else (0.0 if max_err == 0 else math.inf)
    return {"rel_frobenius": rel_f, "max_rel": max_rel, "ref_norm": ref_norm, "ref_max_abs": max_ref,
            "max_abs_err": max_err}


def check_structure(ref: torch.Tensor, out: torch.Tensor, meta: dict, index: int) -> list[Check]:
    """Type (plain ``torch.Tensor``, reported by the worker before any method of the object ran), dtype,
    shape."""
    tag = f"[{index}]"
    checks = [Check(f"type{tag}", meta.get("type") == "torch.Tensor", detail=f"returned {meta.get('type')}",
                    category="wrong_type")]
    checks.append(Check(f"dtype{tag}", out.dtype == ref.dtype,
                        detail=f"expected {ref.dtype}, got {out.dtype}", category="wrong_type"))
    checks.append(Check(f"shape{tag}", tuple(out.shape) == tuple(ref.shape),
                        detail=f"expected {tuple(ref.shape)}, got {tuple(out.shape)}", category="wrong_shape"))
    return checks


def check_finite(ref: torch.Tensor, out: torch.Tensor, index: int) -> Check:
    """NaN or Inf only where the reference has the same (NaN where NaN, +Inf where +Inf, ...)."""
    if not (out.is_floating_point() or out.is_complex()):
        return Check(f"finite[{index}]", True, 0.0, 0.0, "integer output")
    if bool(torch.isfinite(out).all()):  # one pass, one sync in the usual case
        bad = 0
    else:
        bad = 0
        for r, o in zip(_flat_chunks(ref), _flat_chunks(out)):
            o_nf = ~torch.isfinite(o)
            same = (torch.isnan(o) & torch.isnan(r)) | (torch.isinf(o) & torch.isinf(r) & (torch.sign(o) == torch.sign(r)))
            bad += int((o_nf & ~same).sum())
    return Check(f"finite[{index}]", bad == 0, float(bad), 0.0,
                 f"{bad} NaN/Inf elements where the reference is finite", category="nonfinite")


def check_error(ref: torch.Tensor, out: torch.Tensor, precision: str, index: int, override=None,
                label: str = "") -> list[Check]:
    """The paper's scale-invariant criteria: relative Frobenius error and max error over max |y|."""
    tol = tolerances(precision, override)
    if not ref.is_floating_point():
        mismatch = int((ref != out).sum())
        frac = mismatch / max(ref.numel(), 1)
        return [Check(f"exact{label}[{index}]", mismatch == 0, frac, 0.0,
                      f"{mismatch} of {ref.numel()} integer elements differ", category="inaccurate")]
    f = error_figures(ref, out)
    return [
        Check(f"rel_frobenius{label}[{index}]", f["rel_frobenius"] < tol["rel_frobenius"], f["rel_frobenius"],
              tol["rel_frobenius"], f"||y'-y||_F/||y||_F over {ref.numel()} elements", category="inaccurate"),
        Check(f"max_rel{label}[{index}]", f["max_rel"] < tol["max_rel"], f["max_rel"], tol["max_rel"],
              f"max|y'-y| = {f['max_abs_err']:.3g}, max|y| = {f['ref_max_abs']:.3g}", category="inaccurate"),
    ]


# Per-slice errors: every slice (the elements sharing one index of one axis) must be right on its own scale. The
# bound is the max-error threshold, looser than the global Frobenius one; a slice whose reference norm is below
# SLICE_FLOOR of its fair share of the global norm (underflowed softmax tails, empty bags) is judged against that
# floor instead of its own norm.
SLICE_FLOOR = 1e-6


def slice_error_figures(ref: torch.Tensor, out: torch.Tensor) -> list[tuple[int, int, float]]:
    """Per axis ``k`` of a rank >= 2 output: ``(k, j, e)`` for the slice ``j`` along ``k`` with the worst
    ``e = ||y'_s - y_s|| / max(||y_s||, SLICE_FLOOR * ||y|| * sqrt(n_s / n))``. Axes of length 1 and axes whose
    slices hold a single element are skipped (a lone element is not a slice). One pass over the output, chunked
    along axis 0 (differences and per-chunk sums in fp32 or wider, about 10 bytes of temporaries per element of a
    chunk; across chunks in fp64); non-finite positions are left to ``check_finite``.
    """
    if ref.dim() < 2 or ref.numel() == 0 or not ref.is_floating_point():
        return []
    shape = tuple(ref.shape)
    n = ref.numel()
    axes = [k for k in range(ref.dim()) if shape[k] >= 2 and n // shape[k] >= 2]
    if not axes:
        return []
    wd = torch.promote_types(_work_dtype(ref), _work_dtype(out))
    err = {k: torch.zeros(shape[k], dtype=torch.float64, device=ref.device) for k in axes}
    nrm = {k: torch.zeros(shape[k], dtype=torch.float64, device=ref.device) for k in axes}
    rest = n // shape[0]
    step = max(1, _CHUNK // max(rest, 1))
    for i in range(0, shape[0], step):
        r = ref[i:i + step].to(wd)
        d2 = out[i:i + step].to(wd) - r
        bad = ~torch.isfinite(d2)  # a non-finite value on either side (check_finite judges those)
        d2.square_().masked_fill_(bad, 0.0)
        r2 = r.square().masked_fill_(bad, 0.0)
        del bad, r
        for k in axes:
            # per-index sums of one chunk in the working dtype (small vectors), accumulated across chunks in fp64
            dims = [a for a in range(ref.dim()) if a != k]
            if k == 0:
                err[0][i:i + step] += d2.sum(dim=dims).double()
                nrm[0][i:i + step] += r2.sum(dim=dims).double()
            else:
                err[k] += d2.sum(dim=dims).double()
                nrm[k] += r2.sum(dim=dims).double()
    total = sum(float(v.sum()) for v in nrm.values()) / len(axes)
    out_figs = []
    for k in axes:
        share = total * (n // shape[k]) / n
        denom = torch.clamp(nrm[k], min=(SLICE_FLOOR ** 2) * share)
        e = torch.where(denom > 0, err[k] / denom, torch.where(err[k] > 0, math.inf, 0.0)).sqrt_()
        j = int(torch.argmax(e))
        out_figs.append((k, j, float(e[j])))
    return out_figs


def check_slices(ref: torch.Tensor, out: torch.Tensor, precision: str, index: int, override=None,
                 label: str = "") -> list[Check]:
    """Scale-invariant error per slice, on every axis of the output: a kernel that is right on the heavy rows
    and neglects the light ones (which a global relative error allows) fails here. Threshold: the precision's
    ``max_rel`` (``slice_rel`` in a problem's tolerance override)."""
    if not ref.is_floating_point() or ref.shape != out.shape:
        return []
    figs = slice_error_figures(ref, out)
    if not figs:
        return []
    tol = tolerances(precision, override)
    limit = tol.get("slice_rel", tol["max_rel"])
    k, j, worst = max(figs, key=lambda f: f[2])
    return [Check(f"slice_rel_frobenius{label}[{index}]", worst < limit, worst, limit,
                  f"worst slice: index {j} of axis {k} ({ref.numel() // ref.shape[k]} elements), "
                  f"||y'_s-y_s||/||y_s|| over {len(figs)} axes", category="inaccurate")]


def unwritten_count(out_a: torch.Tensor, out_b: torch.Tensor, pattern_a: int, pattern_b: int) -> int:
    """Elements that still hold the poison byte pattern in both runs (never written by the candidate).

    ``out_a`` came from a run with memory poisoned with byte ``pattern_a`` and ``out_b`` with ``pattern_b``;
    an element counts as unwritten only if it holds the full pattern in both, so an output whose true value
    happens to equal one pattern is not miscounted.
    """
    esize = out_a.element_size()
    itype = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[esize]

    def word(byte: int) -> int:
        w = int.from_bytes(bytes([byte]) * esize, "little", signed=True)
        return w

    wa, wb = word(pattern_a), word(pattern_b)
    if esize == 1:
        wa, wb = pattern_a, pattern_b
    n = torch.zeros((), dtype=torch.int64, device=out_a.device)
    for a, b in zip(_flat_chunks(out_a.contiguous()), _flat_chunks(out_b.contiguous())):
        n += ((a.view(itype) == wa) & (b.view(itype) == wb)).sum()
    return int(n)


def nonzero_fraction(t: torch.Tensor) -> float:
    return int(torch.count_nonzero(t)) / max(t.numel(), 1)


def check_written(ref: torch.Tensor, out_a: torch.Tensor, out_b: torch.Tensor | None, pattern_a: int,
                  pattern_b: int, index: int) -> list[Check]:
    """Written fraction from two poison patterns, and the output's nonzero fraction against the reference's.

    Every element must be written. The nonzero-fraction check catches a buffer that was zero-filled but whose
    computed part is tiny (the paper's Example B, 0.3% written): it must be at least the reference's own
    nonzero fraction minus 1% (values that legitimately round to zero).
    """
    checks = []
    if out_b is not None and out_b.shape == out_a.shape:
        unw = unwritten_count(out_a, out_b, pattern_a, pattern_b)
        frac = 1 - unw / max(out_a.numel(), 1)
        checks.append(Check(f"written_fraction[{index}]", unw == 0, frac, 1.0,
                            f"{unw} of {out_a.numel()} elements still hold the poison pattern",
                            category="unwritten"))
    ref_nz, out_nz = nonzero_fraction(ref), nonzero_fraction(out_a)
    checks.append(Check(f"nonzero_fraction[{index}]", out_nz >= ref_nz - 0.01, out_nz, ref_nz - 0.01,
                        f"output {out_nz:.4%} nonzero, reference {ref_nz:.4%}", category="unwritten"))
    return checks


def check_deterministic(out_a: torch.Tensor, out_b: torch.Tensor, ref: torch.Tensor, precision: str,
                        index: int, override=None) -> Check:
    """Two runs on the same input must agree within the correctness tolerance (scaled by the reference)."""
    if out_a.shape != out_b.shape:
        return Check(f"deterministic[{index}]", False, None, None, "the two runs returned different shapes",
                     category="nondeterministic")
    if not out_a.is_floating_point():
        diff = int((out_a != out_b).sum())
        return Check(f"deterministic[{index}]", diff == 0, float(diff), 0.0, f"{diff} elements differ",
                     category="nondeterministic")
    tol = tolerances(precision, override)
    sq_t = torch.zeros(2, dtype=torch.float64, device=out_a.device)
    wd = _work_dtype(out_a)
    for a, b, r in zip(_flat_chunks(out_a), _flat_chunks(out_b), _flat_chunks(ref)):
        d = torch.nan_to_num(a.to(wd) - b.to(wd), nan=0.0, posinf=0.0, neginf=0.0)
        r = torch.nan_to_num(r.to(wd), nan=0.0, posinf=0.0, neginf=0.0)
        sq_t[0] += torch.dot(d, d).double()
        sq_t[1] += torch.dot(r, r).double()
    sq, sq_ref = sq_t.tolist()
    ref_norm = math.sqrt(sq_ref)
    rel = math.sqrt(sq) / ref_norm if ref_norm > 0 else (0.0 if sq == 0 else math.inf)
    return Check(f"deterministic[{index}]", rel < tol["rel_frobenius"], rel, tol["rel_frobenius"],
                 "||run1 - run2||_F / ||y||_F on the same input", category="nondeterministic")


CONSISTENCY_FACTOR = 4.0  # a timed output's error may exceed its trials' own by this factor (a 100th of the tolerance at least)


def timed_figures(ref: torch.Tensor, out: torch.Tensor) -> tuple[float, float]:
    """``(rel_frobenius, max_rel)`` of a whole output, as :func:`error_figures` measures them but in fewer passes
    (a timed call's re-check runs in every round): a difference per chunk, two dot products, two min-max. Where
    a value is not finite, :func:`error_figures` over the finite positions, and NaN (which fails every bound)
    unless the non-finite positions are the reference's own, as the trials' ``check_finite`` allows."""
    acc = torch.zeros(4, dtype=torch.float64, device=ref.device)  # sum d^2, sum y^2, max|d|, max|y|
    wd = torch.promote_types(_work_dtype(ref), _work_dtype(out))
    for r, o in zip(_flat_chunks(ref), _flat_chunks(out)):
        r = r.to(wd)
        d = o.to(wd) - r
        acc[0] += torch.dot(d, d).double()
        acc[1] += torch.dot(r, r).double()
        if d.numel():
            lo, hi = torch.aminmax(d)
            acc[2] = torch.maximum(acc[2], torch.maximum(-lo, hi).double())
            lo, hi = torch.aminmax(r)
            acc[3] = torch.maximum(acc[3], torch.maximum(-lo, hi).double())
    sq_err, sq_ref, max_err, max_ref = acc.tolist()
    if not all(math.isfinite(v) for v in (sq_err, sq_ref, max_err, max_ref)):
        if not check_finite(ref, out, 0).passed:
            return math.nan, math.nan
        f = error_figures(ref, out)
        return f["rel_frobenius"], f["max_rel"]
    rel_f = math.sqrt(sq_err / sq_ref) if sq_ref > 0 else (0.0 if sq_err == 0 else math.inf)
    max_rel = max_err / max_ref if max_ref > 0 else (0.0 if max_err == 0 else math.inf)
    return rel_f, max_rel


def check_timed_output(ref: torch.Tensor, out: torch.Tensor, precision: str, name: str,
                       trial_rel_frobenius: float | None, override=None) -> list[Check]:
    """A timed call's whole output, judged as its correctness trials are, and against them.

    The max error over max|y| and the relative Frobenius error within the tolerance (a stale, wrong or coarse
    output: ``replay``); then, when both pass and the trials measured one, the relative Frobenius error within
    ``CONSISTENCY_FACTOR`` times the candidate's own error in the trials of the domain timed calls draw from, or a
    100th of the tolerance (``timing_tamper``): a candidate that computes less accurately only when timed (it can tell its
    trials by their place, an evaluation's first blocks) must not be paid for the cheaper arithmetic. Integer
    outputs are compared exactly. Whole outputs, not samples: an honest kernel's error concentrated in a few
    elements would make a sample's estimate swing far past the factor whenever it caught one."""
    tol = tolerances(precision, override)
    if not ref.is_floating_point():
        bad = int((ref != out).sum())
        return [Check(f"{name}_exact", bad == 0, float(bad), 0.0, f"{bad} of {ref.numel()} integer elements differ",
                      category="replay")]
    rel_f, max_rel = timed_figures(ref, out)
    out_checks = [
        Check(f"{name}_max_rel", max_rel < tol["max_rel"], max_rel, tol["max_rel"], "max|y'-y| / max|y| of a timed "
              "call's whole output", category="replay"),
        Check(f"{name}_rel_frobenius", rel_f < tol["rel_frobenius"], rel_f, tol["rel_frobenius"],
              "||y'-y||_F / ||y||_F of a timed call's whole output", category="replay"),
    ]
    if all(c.passed for c in out_checks) and trial_rel_frobenius is not None:
        bound = max(CONSISTENCY_FACTOR * trial_rel_frobenius, tol["rel_frobenius"] / 100)
        out_checks.append(Check(f"{name}_as_accurate_as_trials", rel_f <= bound, rel_f, bound,
                                f"||y'-y||_F / ||y||_F of a timed call against {CONSISTENCY_FACTOR:g}x its "
                                f"trials' on the same domain ({trial_rel_frobenius:.3g})", category="timing_tamper"))
    return out_checks


def check_sampled(ref_values: torch.Tensor, got_values: torch.Tensor, ref_max_abs: float, precision: str,
                  name: str, category: str, override=None) -> Check:
    """Compare values sampled at secret positions (inputs after the call)."""
    tol = tolerances(precision, override)
    if got_values.shape != ref_values.shape:
        return Check(name, False, None, None, "sample has the wrong size", category=category)
    if category == "mutation":
        same = (got_values == ref_values) | (torch.isnan(got_values) & torch.isnan(ref_values))
        diff = int((~same).sum())
        return Check(name, diff == 0, float(diff), 0.0, f"{diff} of {got_values.numel()} sampled input "
                     "elements changed", category=category)
    d = (got_values.double() - ref_values.double()).abs()
    d = torch.where(torch.isnan(d), torch.full_like(d, math.inf), d)
    worst = float(d.max()) if d.numel() else 0.0
    scale = ref_max_abs if ref_max_abs > 0 else 1.0
    return Check(name, worst / scale < tol["max_rel"], worst / scale, tol["max_rel"],
                 f"max error over {got_values.numel()} sampled elements / max|y|", category=category)

"""Operation invariants: properties of the candidate's output that hold whatever the reference computed.

Each invariant kind (the vocabulary of ``problems/MANIFEST.md``) is a function
``(inputs, outputs, spec, tol, gen) -> (passed, value, detail)`` evaluated on the trusted side over the trusted
copy of the inputs and the candidate's outputs. ``value`` is the worst relative violation found and ``tol``
the allowed one (``checks.INVARIANT_TOLERANCE``). These catch outputs that are numerically close under an
absolute tolerance but structurally wrong, such as the paper's Example A (softmax over 1024-element chunks,
rows summing to 384).
"""

from __future__ import annotations

import math

import torch

from kbenv.rewards.checks import INVARIANT_TOLERANCE, Check

_ROWS = 256  # rows sampled for row-wise invariants on big tensors
_SAMPLE_ELEMENTS = 1 << 26  # at most this many elements sampled (512 MiB in float64)


def _dims(spec_dim, ndim):
    if spec_dim is None:
        return list(range(ndim))
    dims = spec_dim if isinstance(spec_dim, (list, tuple)) else [spec_dim]
    return [d % ndim for d in dims]


def _rel(a: torch.Tensor, b: torch.Tensor | float) -> float:
    a = a.double()
    b = b.double() if isinstance(b, torch.Tensor) else torch.full_like(a, float(b))
    scale = b.abs().clamp_min(1e-30)
    r = ((a - b).abs() / scale)
    r = torch.where(torch.isnan(r), torch.full_like(r, math.inf), r)
    return float(r.max()) if r.numel() else 0.0


def _sample_rows(y: torch.Tensor, dims: list[int], gen: torch.Generator, *others: torch.Tensor):
    """Sample up to _ROWS "rows" (one index per kept dim, all elements along the reduced dims) without
    copying the whole tensor: the same rows for every tensor given. Returns [n, row_len] tensors."""
    keep = [d for d in range(y.dim()) if d not in dims]
    perm = keep + dims
    kept_shape = [y.shape[d] for d in keep]
    n_keep = int(math.prod(kept_shape)) if keep else 1
    row_len = max(1, int(math.prod(y.shape[d] for d in dims)))
    n = max(1, min(n_keep, _ROWS, _SAMPLE_ELEMENTS // row_len))  # bounded memory for float64 copies
    flat_idx = torch.randperm(n_keep, generator=gen)[:n] if n_keep > n else torch.arange(n_keep)
    idx = []
    rem = flat_idx.clone()
    for size in reversed(kept_shape):
        idx.append(rem % size)
        rem = rem // size
    idx = [i.to(y.device) for i in reversed(idx)]

    def rows(t):
        v = t.permute(perm)  # a view
        sel = v[tuple(idx)] if idx else v.unsqueeze(0)
        return sel.reshape(n, -1)

    return [rows(y)] + [rows(o) for o in others]


def _minmax(t: torch.Tensor) -> tuple[float, float, bool]:
    """Min, max and whether any NaN, reduced natively (no float64 copy of a big tensor)."""
    if t.numel() == 0:
        return 0.0, 0.0, False
    if t.is_floating_point():
        has_nan = bool(torch.isnan(t).any())
        finite = torch.nan_to_num(t, nan=0.0) if has_nan else t
        return float(finite.min()), float(finite.max()), has_nan
    return float(t.min()), float(t.max()), False


def sum_to(x, y, spec, tol, gen):
    (r,) = _sample_rows(y, _dims(spec.get("dim"), y.dim()), gen)
    s = r.double().sum(-1)
    v = _rel(s, spec.get("value", 1.0))
    return v <= tol, v, f"row sums in [{float(s.min()):.6g}, {float(s.max()):.6g}], want {spec.get('value', 1.0)}"


def logsumexp_to(x, y, spec, tol, gen):
    (r,) = _sample_rows(y, _dims(spec.get("dim"), y.dim()), gen)
    s = torch.logsumexp(r.double(), -1)
    target = float(spec.get("value", 0.0))
    v = float((s - target).abs().max())
    return v <= tol, v, f"logsumexp in [{float(s.min()):.6g}, {float(s.max()):.6g}], want {target}"


def norm_to(x, y, spec, tol, gen):
    dims = _dims(spec.get("dim"), y.dim())
    ord_ = float(spec.get("ord", 2))
    mean = spec.get("reduce", "sum") == "mean"
    if len(dims) == y.dim():  # a whole-tensor norm (Frobenius): reduce chunk by chunk
        acc, flat = 0.0, y.reshape(-1)
        for i in range(0, flat.numel(), 1 << 24):
            acc += float((flat[i:i + (1 << 24)].double().abs() ** ord_).sum())
        n = torch.tensor([(acc / max(flat.numel(), 1) if mean else acc) ** (1.0 / ord_)], dtype=torch.float64)
    else:
        (r,) = _sample_rows(y, dims, gen)
        a = r.double().abs() ** ord_
        agg = a.mean(-1) if mean else a.sum(-1)
        n = agg ** (1.0 / ord_)
    v = _rel(n, spec.get("value", 1.0))
    return v <= tol, v, f"norms in [{float(n.min()):.6g}, {float(n.max()):.6g}]"


def standardized(x, y, spec, tol, gen):
    groups = spec.get("groups")
    if groups:
        b, c = y.shape[:2]
        t = y.reshape(b, groups, -1)
        dims = [2]
    else:
        t = y
        dims = _dims(spec.get("dim"), y.dim())
    (r,) = _sample_rows(t, dims, gen)
    r = r.double()
    mean = r.mean(-1)
    var = r.var(-1, unbiased=False)
    v = max(float(mean.abs().max()), _rel(var, 1.0))
    return v <= tol * 5, v, f"|mean| <= {float(mean.abs().max()):.3g}, var in [{float(var.min()):.4g}, {float(var.max()):.4g}]"


def rms_to(x, y, spec, tol, gen):
    (r,) = _sample_rows(y, _dims(spec.get("dim"), y.dim()), gen)
    rms = (r.double() ** 2).mean(-1).sqrt()
    v = _rel(rms, spec.get("value", 1.0))
    return v <= tol * 5, v, f"rms in [{float(rms.min()):.6g}, {float(rms.max()):.6g}]"


def range_(x, y, spec, tol, gen):
    lo, hi = spec.get("lo"), spec.get("hi")
    ymin, ymax, has_nan = _minmax(y)
    below = max(lo - ymin, 0.0) if lo is not None else 0.0
    above = max(ymax - hi, 0.0) if hi is not None else 0.0
    scale = max(abs(lo or 0), abs(hi or 0), 1.0)
    v = math.inf if has_nan else max(below, above) / scale
    return v <= tol * 0.25, v, f"values in [{ymin:.6g}, {ymax:.6g}], want [{lo}, {hi}]"


def nonnegative(x, y, spec, tol, gen):
    return range_(x, y, {"lo": 0.0}, tol, gen)


def extreme_of(x, y, spec, tol, gen):
    inp = x[spec.get("input", 0)]
    dim = spec["dim"] % inp.dim()
    want = inp.amax(dim, keepdim=True) if spec.get("mode", "max") == "max" else inp.amin(dim, keepdim=True)
    got = y if y.dim() == inp.dim() else y.unsqueeze(dim)
    if got.shape != want.shape:
        return False, math.inf, f"output shape {tuple(y.shape)} is not the reduction of {tuple(inp.shape)}"
    lo, hi, _ = _minmax(inp)
    v = float((got.double() - want.double()).abs().max()) / max(abs(lo), abs(hi), 1e-30)
    return v <= tol * 1e-2, v, "output is the max/min along the dim"


def index_of_extreme(x, y, spec, tol, gen):
    inp = x[spec.get("input", 0)]
    dim = spec["dim"] % inp.dim()
    want = inp.amax(dim) if spec.get("mode", "max") == "max" else inp.amin(dim)
    if y.dtype not in (torch.int64, torch.int32) or y.shape != want.shape:
        return False, math.inf, f"indices {y.dtype} {tuple(y.shape)}, want int {tuple(want.shape)}"
    if bool(((y < 0) | (y >= inp.shape[dim])).any()):
        return False, math.inf, "index out of range"
    got = inp.gather(dim, y.long().unsqueeze(dim)).squeeze(dim)
    bad = int((got != want).sum())
    return bad == 0, float(bad), f"{bad} indices do not point at an extreme value (ties allowed)"


def cumulative(x, y, spec, tol, gen):
    inp = x[spec.get("input", 0)]
    dim = spec["dim"] % inp.dim()
    if y.shape != inp.shape:
        return False, math.inf, "shape differs from the input"
    others = [x[spec["mask_input"]]] if spec.get("mask_input") is not None else []
    rows = _sample_rows(y, [dim], gen, inp, *others)  # [n, L] rows along the scanned dim
    yy, xi = rows[0].double(), rows[1].double()
    if others:
        xi = xi * rows[2].double()
    if spec.get("reverse"):
        xi, yy = xi.flip(-1), yy.flip(-1)
    op = spec.get("op", "sum")
    lead = 0.0
    if spec.get("exclusive"):
        first = yy[:, :1]
        lead = float(first.abs().max()) if op == "sum" else float((first - 1).abs().max())
        yy, xi = yy[:, 1:], xi[:, :-1]
    if yy.shape[-1] == 0:
        return lead <= tol, lead, "nothing to check"
    if op == "sum":
        steps = torch.diff(yy, dim=-1, prepend=torch.zeros_like(yy[:, :1]))
        # The tolerance scales with the running magnitude: a sum of n terms carries ~n ulps of its size.
        scale = yy.abs().amax(-1, keepdim=True).clamp_min(1e-30)
        v = max(float(((steps - xi).abs() / scale).max()), lead)
        return v <= tol, v, "successive differences reproduce the input"
    v = max(float((yy[:, :1] - xi[:, :1]).abs().max() / xi.abs().amax().clamp_min(1e-30)), lead)
    prev, nxt = yy[:, :-1], yy[:, 1:]
    pred = prev * xi[:, 1:]
    big = prev.abs() > 1e-20
    if bool(big.any()):
        v = max(v, float(((nxt - pred).abs() / pred.abs().clamp_min(1e-30))[big].max()))
    return v <= tol, v, "successive ratios reproduce the input"


def freivalds(x, y, spec, tol, gen):
    # float32 (not float64) products: a matrix-vector product in fp32 is accurate far beyond the tolerance, and
    # a float64 copy of an 8 GiB input would not fit beside it.
    a, b = x[spec.get("a", 0)].float(), x[spec.get("b", 1)].float()
    if spec.get("transpose_a"):
        a = a.transpose(-1, -2)
    if spec.get("transpose_b"):
        b = b.transpose(-1, -2)
    r = torch.randn(b.shape[-1], 1, generator=gen, dtype=torch.float32).to(y.device)
    lhs = y.float() @ r
    form = spec.get("form", "matmul")
    if form == "diag_broadcast":  # y = diag(a) B, a a vector
        rhs = a.unsqueeze(-1) * (b @ r)
    elif form == "triu":
        rhs = torch.triu(a @ b) @ r
    elif form == "tril":
        rhs = torch.tril(a @ b) @ r
    else:
        rhs = a @ (b @ r)
    v = float((lhs.double() - rhs.double()).norm() / rhs.double().norm().clamp_min(1e-30))
    return v <= tol, v, "||y r - A (B r)|| / ||A (B r)|| for a random r"


def window_range(x, y, spec, tol, gen):
    lo, hi, _ = _minmax(x[spec.get("input", 0)])
    return range_(x, y, {"lo": lo, "hi": hi}, tol, gen)


def sorted_topk(x, y, spec, tol, gen):
    if not isinstance(y, (tuple, list)) or len(y) != 2:
        return False, math.inf, "top-k must return (values, indices)"
    vals, idx = y
    inp = x[spec.get("input", 0)]
    dim = spec.get("dim", -1) % inp.dim()
    if idx.dtype not in (torch.int64, torch.int32) or idx.shape != vals.shape:
        return False, math.inf, "indices have the wrong dtype or shape"
    if bool(((idx < 0) | (idx >= inp.shape[dim])).any()):
        return False, math.inf, "index out of range"
    got = inp.gather(dim, idx.long())
    v = float((got.double() - vals.double()).abs().max()) if got.numel() else 0.0
    d = torch.diff(vals.double(), dim=dim)
    unsorted = float(d.clamp_min(0).max()) if spec.get("largest", True) else float((-d).clamp_min(0).max())
    dup = 0
    s = idx.sort(dim).values
    dup = int((torch.diff(s, dim=dim) == 0).sum())
    ok = v == 0 and unsorted == 0 and dup == 0
    return ok, max(v, unsorted, float(dup)), f"gather mismatch {v:.3g}, sort violation {unsorted:.3g}, {dup} repeated indices"


def bag_total(x, y, spec, tol, gen):
    # Only meaningful with the embedding table and the flat index list among the inputs; the problem states
    # where they are: {"weight": i, "indices": j, "per_sample_weights": k (optional)}.
    w = x[spec["weight"]]
    idx = x[spec["indices"]].long()
    rows = w[idx].double()
    if spec.get("per_sample_weights") is not None:
        rows = rows * x[spec["per_sample_weights"]].double().unsqueeze(-1)
    want = rows.sum(0)
    got = y.double().sum(0)
    v = float((got - want).norm() / want.norm().clamp_min(1e-30))
    return v <= tol, v, "sum over bags equals the sum of the gathered rows"


KINDS = {
    "sum_to": sum_to, "logsumexp_to": logsumexp_to, "norm_to": norm_to, "standardized": standardized,
    "rms_to": rms_to, "range": range_, "nonnegative": nonnegative, "extreme_of": extreme_of,
    "index_of_extreme": index_of_extreme, "cumulative": cumulative, "freivalds": freivalds,
    "window_range": window_range, "sorted_topk": sorted_topk, "bag_total": bag_total,
}
# Invariants that replace the exact-match check on integer outputs (ties make several answers right).
TIE_TOLERANT = {"index_of_extreme", "sorted_topk"}


def check_invariants(specs, inputs: list, outputs: list, precision: str, seed: int = 0) -> list[Check]:
    """Evaluate each invariant spec; a spec may target output ``output`` (default 0) or all (``"all"``)."""
    tol = INVARIANT_TOLERANCE[precision]
    checks = []
    gen = torch.Generator().manual_seed(seed)
    for spec in specs:
        kind = spec["kind"]
        fn = KINDS.get(kind)
        if fn is None:
            raise KeyError(f"unknown invariant kind {kind!r}")  # a manifest bug: the harness must fail loudly
        which = spec.get("output", 0)
        y = outputs if which == "all" or kind == "sorted_topk" and len(outputs) == 2 else outputs[which]
        try:
            ok, value, detail = fn(inputs, y, spec, tol, gen)
        except torch.OutOfMemoryError:
            raise  # the harness ran out of memory: a harness fault, never the candidate's failure
        except RuntimeError as e:  # a malformed output (shape mismatch etc.) breaks the invariant, not the harness
            ok, value, detail = False, math.inf, f"could not be evaluated on the output: {e}"
        checks.append(Check(f"invariant:{kind}", bool(ok), float(value), tol, detail, category="invariant"))
    return checks

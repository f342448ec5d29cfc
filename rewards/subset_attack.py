"""The generated statistical attack: a reference that reads only part of its reduced axis and extrapolates.

For every problem whose manifest names reduced axes (``reduced``, MANIFEST.md), :func:`variants` lists the ways a
kernel could skip 1/16 of the reduced elements -- a contiguous block a third of the way along the axis (the ends
can lie outside every pooling window, where skipping is legitimate) or every 16th element (strided) -- and
extrapolate from the rest:

- ``copy``: the skipped elements are stood in for by kept neighbours (the next block, or the element before):
  an unbiased estimate of every additive statistic (sums, means, norms, a softmax's normaliser, mean losses) and
  exactly "the max of what was read" for max/min/argmax. For the ``softmax`` and ``normalization`` families the
  statistic estimated this way is applied to every element, read or not (a per-fiber affine map fitted on the
  read elements, exact for these ops), as a kernel that normalises in chunks would.
- ``rescale``: the skipped elements are dropped (zeros) and the output is scaled by n / (n - skipped): exactly
  drop-and-rescale for outputs that are sums or means over the axis (sum and mean reductions, pooling sums,
  mean losses). Not generated for ``softmax`` and ``normalization`` (their statistic is not the output).

:func:`attack_outputs` computes the attacked outputs on the trusted side (no sandbox), and :func:`judge_attack`
runs the verifier's correctness checks on them for one input domain. ``python -m kbenv.rewards.subset_attack``
runs every applicable problem at the CPU size on every domain its manifest lists, at fp32 and bf16 (bf16: the
inputs rounded by torch, the reference in fp32 rounded once, as the sandbox computes it), and prints which
variants the verifier rejected.
"""

from __future__ import annotations

import argparse
import dataclasses

import torch

from kbenv.problems import PRECISIONS, Problem, list_problems, make_inputs, make_model, problem_seed
from kbenv.rewards.verdict import Trial, correctness_checks

DROP_FRACTION = 16  # one element in 16 is skipped
NORMALIZER_FAMILIES = ("softmax", "normalization")


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way to skip part of a reduced axis: ``inputs`` reduced together along ``dim``, ``pattern``
    (``contiguous`` or ``strided``) and ``estimator`` (``copy`` or ``rescale``)."""

    inputs: tuple
    dim: int
    pattern: str
    estimator: str

    @property
    def name(self) -> str:
        return f"{self.estimator}/{self.pattern}/in{list(self.inputs)}@dim{self.dim}"


@dataclasses.dataclass(frozen=True)
class AttackResult:
    """The verdict on one variant over every domain: ``rejected`` when any correctness check of any trial
    failed; ``failed_checks`` names the first failing checks (``domain:check``). A variant whose outputs equal
    the reference's exactly on every domain skipped elements the op never reads (a pooling window's stride
    passing over them): it is no attack, and ``reads_skipped`` is False."""

    problem: str
    precision: str
    variant: str
    rejected: bool
    failed_checks: tuple
    reads_skipped: bool = True  # False: the output never changed (the op does not read the skipped elements)


def positions(n: int, pattern: str) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``(skipped, stand_in)`` indices along an axis of length ``n``; None when the axis is too short."""
    m = max(1, round(n / DROP_FRACTION))
    if pattern == "contiguous":
        if n < 2 * m:
            return None
        start = n // 3
        if start + 2 * m > n:
            start = 0
        return torch.arange(start, start + m), torch.arange(start + m, start + 2 * m)
    if pattern == "strided":
        stride = n // m
        if stride < 2:
            return None
        skip = torch.arange(stride - 1, n, stride)[:m]
        return skip, skip - 1
    raise ValueError(pattern)


def variants(problem: Problem) -> list[Variant]:
    out = []
    for ins, dim in problem.reduced:
        for pattern in ("contiguous", "strided"):
            out.append(Variant(tuple(ins), dim, pattern, "copy"))
            if problem.family not in NORMALIZER_FAMILIES:
                out.append(Variant(tuple(ins), dim, pattern, "rescale"))
    return out


def _as_list(x) -> list:
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _fit_per_fiber(full: torch.Tensor, est: torch.Tensor, dim: int, kept: torch.Tensor,
                   chunk_elements: int = 1 << 26) -> torch.Tensor:
    """Map ``full`` through the per-fiber affine map (along ``dim``) that takes it to ``est`` on ``kept``. In
    float64, a bounded number of fibers at a time (a full-size output is GiBs: whole float64 copies of it do not
    fit beside the rest on an H200)."""
    f_all = full.movedim(dim, -1)
    e_all = est.movedim(dim, -1)
    shape = f_all.shape
    n = shape[-1]
    f2, e2 = f_all.reshape(-1, n), e_all.reshape(-1, n)
    out = torch.empty_like(f2)
    step = max(1, chunk_elements // max(n, 1))
    for r in range(0, f2.shape[0], step):
        f, e = f2[r:r + step].double(), e2[r:r + step].double()
        fs, es = f[:, kept], e[:, kept]
        fm, em = fs.mean(-1, keepdim=True), es.mean(-1, keepdim=True)
        var = ((fs - fm) ** 2).mean(-1, keepdim=True)
        cov = ((fs - fm) * (es - em)).mean(-1, keepdim=True)
        a = torch.where(var > 0, cov / torch.where(var > 0, var, 1.0), torch.ones_like(var))
        b = em - a * fm
        out[r:r + step] = (a * f + b).to(full.dtype)
        del f, e, fs, es
    return out.reshape(shape).movedim(-1, dim)


def attack_outputs(problem: Problem, model: torch.nn.Module, inputs: list, reference_fp32: list,
                   variant: Variant) -> list | None:
    """The outputs of the reference run as a kernel that skips part of the reduced axis would compute them
    (fp32; the caller rounds to the precision). None when the axis is too short for the variant."""
    first = inputs[variant.inputs[0]]
    dim = variant.dim % first.dim()
    n = first.shape[dim]
    pos = positions(n, variant.pattern)
    if pos is None:
        return None
    skip, src = (p.to(first.device) for p in pos)
    kept = torch.ones(n, dtype=torch.bool, device=first.device)
    kept[skip] = False
    changed = list(inputs)
    for i in variant.inputs:
        x = inputs[i].clone()
        d = variant.dim % x.dim()
        if variant.estimator == "rescale" and x.is_floating_point():
            x.index_fill_(d, skip, 0)
        else:
            x.index_copy_(d, skip, x.index_select(d, src))
        changed[i] = x
    with torch.no_grad():
        outs = _as_list(model(*changed))
    result = []
    for o, full in zip(outs, reference_fp32):
        if not o.is_floating_point():
            result.append(o)
            continue
        if variant.estimator == "rescale":
            o = o * (n / (n - len(skip)))
        elif (problem.family in NORMALIZER_FAMILIES and o.dim() == first.dim()
              and o.shape[dim] == n):
            o = _fit_per_fiber(full, o, dim, kept)
        result.append(o)
    return result


def _round(outs: list, dtype: torch.dtype) -> list:
    return [o.to(dtype) if o.is_floating_point() else o for o in outs]


def judge_attack(problem: Problem, precision: str, size: str = "small", domains=None,
                 seed_salt: str = "attack", device: str = "cpu") -> list[AttackResult]:
    """Every variant of ``problem`` judged by the verifier's correctness checks on each domain (the problem's
    own list by default); inputs and reference as the sandbox builds them at ``precision`` (``size`` and
    ``device``: ``full`` on ``cuda`` is the H200 run at the verifier level)."""
    dtype = PRECISIONS[precision]
    ns = problem.namespace(size)
    model = make_model(ns, "Model", 42, device, torch.float32)
    vs = variants(problem)
    failed: dict[str, list] = {v.name: [] for v in vs}
    skipped: set[str] = set()
    changed: dict[str, bool] = {v.name: False for v in vs}
    for t_i, domain in enumerate(domains or problem.domains):
        inputs = make_inputs(ns, problem_seed(problem.id, f"{seed_salt}:{domain}"), domain, device, dtype,
                             problem.broad_inputs)
        up = [x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
        with torch.no_grad():
            ref32 = [o.detach() for o in _as_list(model(*up))]
        refs = _round(ref32, dtype)
        for v in vs:
            outs = attack_outputs(problem, model, up, ref32, v)
            if outs is None:
                skipped.add(v.name)
                continue
            changed[v.name] |= any(not torch.equal(a, r) for a, r in zip(outs, ref32))
            trial = Trial(domain, inputs, refs, _round(outs, dtype), None,
                          [{"type": "torch.Tensor"} for _ in refs], 0xFE, 0x7F)
            checks = correctness_checks(trial, precision, problem.invariants, problem.tolerance, seed=t_i)
            failed[v.name] += [f"{domain}:{c.name}" for c in checks if not c.passed]
            del outs, trial, checks
        del inputs, up, ref32, refs
    return [AttackResult(problem.id, precision, v.name, bool(failed[v.name]), tuple(failed[v.name][:4]),
                         changed[v.name]) for v in vs if v.name not in skipped]


def applicable() -> list[Problem]:
    return [p for p in list_problems() if p.reduced]


def rejection_rate(problem: Problem, precision: str, draws: int, size: str = "small",
                   device: str = "cpu") -> dict[str, float]:
    """Per variant, the fraction of ``draws`` independent draws (inputs and their structure, as each evaluation
    draws them from the supervisor's secret) on which the verifier rejected it."""
    hits: dict[str, list] = {}
    for d in range(draws):
        for r in judge_attack(problem, precision, size=size, device=device, seed_salt=f"attack:draw{d}"):
            if r.reads_skipped:
                hits.setdefault(r.variant, []).append(r.rejected)
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return {v: sum(h) / len(h) for v, h in hits.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="Run the generated subset attack over the registry (CPU size).")
    ap.add_argument("--precision", action="append", choices=["fp32", "bf16"])
    ap.add_argument("--only", nargs="*", help="problem ids")
    ap.add_argument("--size", default="small", choices=["small", "medium", "full"])
    ap.add_argument("--device", default="cpu", help="cpu or cuda (full size wants a GPU)")
    ap.add_argument("--default-only", action="store_true",
                    help="judge on the official domain alone (shows what the attack earns without the others)")
    ap.add_argument("--draws", type=int, default=0,
                    help="instead: each variant's rejection rate over this many independent draws of the inputs")
    args = ap.parse_args(argv)
    precs = args.precision or ["fp32", "bf16"]
    probs = [p for p in applicable() if not args.only or p.id in args.only]
    if args.draws:
        for p in probs:
            for pr in (x for x in precs if x in p.precision_allowed):
                for v, rate in rejection_rate(p, pr, args.draws, args.size, args.device).items():
                    print(f"{p.id:24s} {pr} {v:32s} rejected on {rate:6.1%} of {args.draws} draws", flush=True)
        return
    rejected = {pr: 0 for pr in precs}
    for p in probs:
        for pr in precs:
            if pr not in p.precision_allowed:
                continue
            res = [r for r in judge_attack(p, pr, size=args.size, device=args.device,
                                           domains=["default"] if args.default_only else None)
                   if r.reads_skipped]
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()  # one problem's full-size tensors at a time
            ok = all(r.rejected for r in res)
            rejected[pr] += ok
            passed = [r.variant for r in res if not r.rejected]
            print(f"{p.id:24s} {p.family:14s} {pr}: {sum(r.rejected for r in res)}/{len(res)} variants rejected"
                  + (f"; passed: {', '.join(passed)}" if passed else ""), flush=True)
    for pr in precs:
        print(f"{pr}: {rejected[pr]} of {len(probs)} applicable problems rejected under every variant")


if __name__ == "__main__":
    main()

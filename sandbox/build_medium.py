"""Size each problem's ``medium`` tier so that a whole evaluation fits a 24 GB GPU, and write it to the manifests.

    python -m kbenv.sandbox.build_medium [--set kernelbench|dlrm] [--check]

A problem's medium size is the largest one whose memory plan (:mod:`kbenv.sandbox.memplan`: everything the
harness keeps, supervisor, lent slots, the worker's cap, the baseline worker, contexts) fits
``MEDIUM_BUDGET_BYTES`` (22 GiB, under the 23.6 GiB a 24 GB card reports) at every precision the problem
allows:

1. ``{}`` (the full size) when the full size already fits;
2. otherwise only the leading size constant (the first one the problem's ``small`` size names: a batch, or a
   matmul's M) made smaller, down to its small value at most, so rows, channels and sequence lengths keep
   the full size's character;
3. otherwise the leading constant at its small value and every other size constant the small size names
   scaled together toward its small value (the same fraction of the way in log scale), as little as fits.

Values stay round where the full size's are (at most three significant bits, 3072 or 1280 rather than
3191) and stay odd where the full size's are odd (the sets use odd sizes on purpose). The result is written
as each entry's ``medium`` field, after ``small``, in ``manifest.json`` and in the hand-written parts it is
built from, so ``build_manifest --check`` stays true. ``--check`` fails if a committed value differs from a
fresh build. The plans are made with ``memplan.plan(..., medium_tier_rule=True)``, the count the tier was built
with: a later correction of the plan (stop 34: the baselines' region holds inputs only on cuda, and the decoy's
room is kept before the reference cache) does not move the sizes users compare results at. This is a build tool
of the sandbox (it needs the plan), which is why it lives here and not in
``problems/``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from kbenv.problems import SETS, Problem, list_problems
from kbenv.sandbox import memplan

MEDIUM_BUDGET_BYTES = 22 * memplan.GiB
_HOST_IGNORED = 1 << 60  # the medium tier is sized for the GPU; the host is checked at preflight


def medium_plans(problem: Problem, overrides: dict) -> list[memplan.MemoryPlan]:
    """The plans of the problem at ``overrides`` against the medium budget, one per allowed precision."""
    return [memplan.plan(problem, "full", prec, MEDIUM_BUDGET_BYTES, overrides=overrides, host_budget=_HOST_IGNORED,
                         medium_tier_rule=True)
            for prec in problem.precision_allowed]


def _fits(problem: Problem, overrides: dict) -> bool:
    try:
        return all(p.fits for p in medium_plans(problem, overrides))
    except Exception:  # noqa: BLE001 - a combination the problem's code rejects is no candidate
        return False


def _round_bits(v: int) -> int:
    """The largest value <= v with at most three significant bits (..., 1024, 1280, 1536, 1792, 2048, ...)."""
    if v < 8:
        return v
    shift = v.bit_length() - 3
    return (v >> shift) << shift


def _is_round(v: int) -> bool:
    return v > 0 and _round_bits(v) == v


def _shape_like(full: int, v: int) -> int:
    """``v`` (at most ``full``) kept in the full value's style: round if it is round, odd if it is odd."""
    v = max(1, min(int(v), full))
    if _is_round(full):
        return _round_bits(v)
    if full % 2 == 1 and v % 2 == 0:
        v = max(1, v - 1)
    return v


def _candidates(full: int, small: int) -> list[int]:
    """Values between ``small`` and ``full`` in the full value's style, ascending."""
    if _is_round(full):
        vals = {v for v in (_round_bits(x) for x in _geometric(small, full)) if small <= v <= full}
    else:
        vals = {v for v in range(small, full + 1) if full % 2 == 0 or v % 2 == 1} if full - small < 4096 else \
            {_shape_like(full, x) for x in _geometric(small, full)}
    vals.add(full)
    vals.add(small)
    return sorted(v for v in vals if small <= v <= full)


def _geometric(lo: int, hi: int, n: int = 400):
    lo = max(lo, 1)
    for i in range(n + 1):
        yield int(round(math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * i / n)))
    for x in range(lo, min(hi, lo + 64) + 1):
        yield x


def _largest_fitting(values: list[int], fits) -> int | None:
    """The largest value in ascending ``values`` for which ``fits`` holds (memory grows with the value)."""
    lo, hi, best = 0, len(values) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(values[mid]):
            best, lo = values[mid], mid + 1
        else:
            hi = mid - 1
    return best


def medium_overrides(problem: Problem) -> dict:
    """The problem's medium size (see the module docstring); raises ValueError when even the small size's
    constants do not fit."""
    if _fits(problem, {}):
        return {}
    full_ns = problem.namespace("full")
    keys = list(problem.small)
    full = {k: int(full_ns[k]) for k in keys}
    small = {k: int(v) for k, v in problem.small.items()}
    lead = keys[0]
    best = _largest_fitting(_candidates(full[lead], small[lead]), lambda v: _fits(problem, {lead: v}))
    if best is not None:
        return {lead: best}

    def at(t: float) -> dict:
        scaled = {k: _shape_like(full[k], math.exp((1 - t) * math.log(full[k]) + t * math.log(max(small[k], 1))))
                  for k in keys[1:]}
        return {lead: small[lead], **scaled}

    if not _fits(problem, at(1.0)):
        raise ValueError(f"{problem.id}: even its small size's constants do not fit {MEDIUM_BUDGET_BYTES / 2**30:.0f} GiB")
    lo, hi = 0.0, 1.0  # fits at hi, not at lo
    for _ in range(30):
        mid = (lo + hi) / 2
        if _fits(problem, at(mid)):
            hi = mid
        else:
            lo = mid
    return at(hi)


def _with_medium(entry: dict, medium: dict) -> dict:
    """The entry with ``medium`` set, placed right after ``small`` (or at the end when there is no small)."""
    out = {}
    for k, v in entry.items():
        if k == "medium":
            continue
        out[k] = v
        if k == "small":
            out["medium"] = medium
    if "medium" not in out:
        out["medium"] = medium
    return out


def _indent_of(text: str) -> int:
    line = next(ln for ln in text.splitlines()[1:] if ln.strip())
    return len(line) - len(line.lstrip(" "))


def with_mediums(text: str, mediums: dict) -> str:
    """A manifest's (or a list of parts') JSON text with ``medium`` set on the entries ``mediums`` names, in
    the same indent; the text unchanged when nothing differs."""
    data = json.loads(text)
    entries = data["problems"] if isinstance(data, dict) else data
    changed = False
    for i, e in enumerate(entries):
        if e.get("id") in mediums and e.get("medium") != mediums[e["id"]]:
            entries[i] = _with_medium(e, mediums[e["id"]])
            changed = True
    return json.dumps(data, indent=_indent_of(text)) + "\n" if changed else text


def _rewrite(path: Path, mediums: dict) -> bool:
    """Set ``medium`` in one file, read right before writing (other fields may be edited meanwhile)."""
    text = path.read_text()
    new = with_mediums(text, mediums)
    if new != text:
        path.write_text(new)
    return new != text


def manifest_files(set_name: str) -> list[Path]:
    """The files that hold a set's entries: its hand-written parts and the manifest built from them."""
    set_dir = SETS[set_name]
    return sorted(set_dir.glob("_parts/*.json")) + sorted(set_dir.glob("_part.json")) + [set_dir / "manifest.json"]


def build(set_name: str) -> dict[str, dict]:
    """Every problem of the set: its medium overrides."""
    return {p.id: medium_overrides(p) for p in list_problems(set_name)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=sorted(SETS), action="append")
    ap.add_argument("--check", action="store_true", help="fail if a committed medium size differs from a fresh build")
    args = ap.parse_args(argv)
    status = 0
    for name in args.set or sorted(SETS):
        fresh = build(name)
        if args.check:
            stale = [p.id for p in list_problems(name) if p.medium != fresh[p.id]]
            if stale:
                print(f"{name}: medium sizes are stale for {', '.join(stale)}: run python -m kbenv.sandbox.build_medium")
                status = 1
            continue
        for f in manifest_files(name):
            if _rewrite(f, fresh):
                print(f"wrote {f}")
        for pid, med in fresh.items():
            if med:
                print(f"  {pid}: {med}")
    return status


if __name__ == "__main__":
    sys.exit(main())

"""Table-1-style summaries of a rollout run's records (see kbenv.records).

Unit of account. Records are grouped into *results*, one per ``(problem, episode, sample)``. Each result is
read two ways:

* ``final``: the record with the highest ``turn`` (ties: the one written last). This is what the agent
  ended with, and the headline figure.
* ``best``: the best turn, ranked by (verdict is pass, correct, speedup when pass, turn). If no turn did
  better than the last, the best turn is the final one.

Figures per view (all counts are of results):

* ``correct`` / ``correct_pct``: ``correct is True`` (outputs right, whatever the timing verdict).
* ``passed`` / ``pass_pct``: ``verdict == "pass"`` (correct and every timing and anti-cheat check passed).
* ``faster`` / ``faster_pct``: verdict pass and ``speedup > 1``; ``verified_speedups`` is the same count
  under the paper's name ("independently verified speedups on 22 of 56").
* ``speedup_median`` / ``speedup_max``: over verdict-pass results with a speedup.
  ``speedup_median_faster``: over the faster ones only (the paper's "median of 1.235x").
* ``geomean_speedup_correct``: geometric mean speedup over ``correct`` results with a speedup (KernelBench's
  figure; it can include a correct kernel whose timing was rejected, e.g. ``timing_escape``).
  ``geomean_speedup_verified``: the same over verdict-pass results, which is the one to trust.
* ``failure_categories``: ``category`` counts over verdict-fail results, most frequent first.
* ``fast_p``: for p in :data:`FAST_P_THRESHOLDS`, the fraction of the *problem set* with at least one result
  (any episode or sample) that is verdict pass with ``speedup > p`` (KernelBench's fast_p, with verdict pass
  in place of allclose). Problems in ``problems`` with no record count as failures.
* ``by_family``: all of the above per op family (the record's ``family``), fast_p over that family's problems.

Percentages (``*_pct``) are 0-100 over results present; ``fast_p`` values are fractions 0-1 over problems.
Speedups are only GPU figures when records have ``speedup_meaningful`` true; :func:`format_report` says so
when they are not.
"""

from __future__ import annotations

import math
import os
import statistics
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

__all__ = [
    "FAST_P_THRESHOLDS",
    "HISTOGRAM_BIN_LOG2",
    "summarize",
    "format_report",
    "plot_speedups",
    "speedup_figure",
    "final_results",
    "best_results",
]

FAST_P_THRESHOLDS: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)

#: Width of a speedup histogram bin in log2 units: 0.5 is a factor of sqrt(2) per bin.
HISTOGRAM_BIN_LOG2 = 0.5

_REQUIRED = ("problem", "family", "episode", "sample", "turn", "verdict", "correct", "speedup", "speedup_meaningful")

_CPU_NOTE = (
    "Speedups are CPU-interpreter figures (speedup_meaningful is false on every record), not GPU figures: "
    "they say nothing about kernel performance on a GPU."
)
_MIXED_NOTE = (
    "WARNING: records mix GPU-timed results with CPU-interpreter ones (speedup_meaningful differs); "
    "speedup figures combine incomparable timings."
)

_MIXED_BUDGET_NOTE = (
    "WARNING: records were timed under different timing budgets (--timing-budget); their speedups differ in noise."
)


def _p_label(p: float) -> str:
    return f"{p:g}"


def _check(record: Mapping[str, Any], index: int) -> None:
    missing = [k for k in _REQUIRED if k not in record]
    if missing:
        raise ValueError(f"record {index} ({record.get('problem')!r}) lacks field(s) {missing}")
    speedup = record["speedup"]
    if speedup is not None:
        if isinstance(speedup, bool) or not isinstance(speedup, (int, float)):
            raise ValueError(f"record {index} ({record['problem']!r}): speedup {speedup!r} is not a number")
        if not (math.isfinite(speedup) and speedup > 0):
            raise ValueError(f"record {index} ({record['problem']!r}): speedup {speedup!r} is not finite and > 0")
    if record["verdict"] not in ("pass", "fail"):
        raise ValueError(f"record {index} ({record['problem']!r}): verdict {record['verdict']!r} is not pass/fail")


def _group(records: Sequence[Mapping[str, Any]]) -> dict[tuple, list[tuple[int, Mapping[str, Any]]]]:
    groups: dict[tuple, list[tuple[int, Mapping[str, Any]]]] = {}
    for index, record in enumerate(records):
        _check(record, index)
        key = (record["problem"], record["episode"], record["sample"])
        groups.setdefault(key, []).append((index, record))
    return groups


def final_results(records: Iterable[Mapping[str, Any]]) -> dict[tuple, Mapping[str, Any]]:
    """``{(problem, episode, sample): record of its highest turn}``; a tie goes to the record written last."""
    groups = _group(list(records))
    return {key: max(items, key=lambda ir: (ir[1]["turn"], ir[0]))[1] for key, items in groups.items()}


def _best_rank(item: tuple[int, Mapping[str, Any]]) -> tuple:
    index, record = item
    passed = record["verdict"] == "pass"
    speedup = record["speedup"] if passed and record["speedup"] is not None else 0.0
    return (passed, record["correct"] is True, speedup, record["turn"], index)


def best_results(records: Iterable[Mapping[str, Any]]) -> dict[tuple, Mapping[str, Any]]:
    """``{(problem, episode, sample): record of its best turn}`` (see the module docstring for the ranking)."""
    groups = _group(list(records))
    return {key: max(items, key=_best_rank)[1] for key, items in groups.items()}


def _is_faster(record: Mapping[str, Any], p: float = 1.0) -> bool:
    return record["verdict"] == "pass" and record["speedup"] is not None and record["speedup"] > p


def _geomean(values: Sequence[float]) -> float | None:
    if not values:
        return None
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


def _histogram(speedups: Sequence[float]) -> list[dict]:
    """Bins of width HISTOGRAM_BIN_LOG2 in log2(speedup), aligned so that 1x is a bin edge."""
    if not speedups:
        return []
    logs = [math.log2(s) for s in speedups]
    lo_bin = math.floor(min(logs) / HISTOGRAM_BIN_LOG2)
    hi_bin = math.floor(max(logs) / HISTOGRAM_BIN_LOG2)
    counts = Counter(math.floor(v / HISTOGRAM_BIN_LOG2) for v in logs)
    return [
        {
            "lo_log2": b * HISTOGRAM_BIN_LOG2,
            "hi_log2": (b + 1) * HISTOGRAM_BIN_LOG2,
            "lo_x": 2.0 ** (b * HISTOGRAM_BIN_LOG2),
            "hi_x": 2.0 ** ((b + 1) * HISTOGRAM_BIN_LOG2),
            "count": counts.get(b, 0),
        }
        for b in range(lo_bin, hi_bin + 1)
    ]


def _pct(count: int, total: int) -> float | None:
    return 100.0 * count / total if total else None


def _figures(
    results: Sequence[Mapping[str, Any]], problem_set: Sequence[str], thresholds: Sequence[float]
) -> dict:
    n = len(results)
    correct = sum(1 for r in results if r["correct"] is True)
    passed = [r for r in results if r["verdict"] == "pass"]
    faster = [r for r in passed if _is_faster(r)]
    pass_speedups = sorted(r["speedup"] for r in passed if r["speedup"] is not None)
    faster_speedups = sorted(r["speedup"] for r in faster)
    correct_speedups = [r["speedup"] for r in results if r["correct"] is True and r["speedup"] is not None]
    categories = Counter(r["category"] if r.get("category") else "uncategorized" for r in results if r["verdict"] == "fail")

    fast_p = {}
    for p in thresholds:
        solved = {r["problem"] for r in results if _is_faster(r, p)}
        fast_p[_p_label(p)] = len(solved & set(problem_set)) / len(problem_set) if problem_set else None

    return {
        "n_results": n,
        "n_problems": len(problem_set),
        "correct": correct,
        "correct_pct": _pct(correct, n),
        "passed": len(passed),
        "pass_pct": _pct(len(passed), n),
        "faster": len(faster),
        "faster_pct": _pct(len(faster), n),
        "verified_speedups": len(faster),
        "speedup_median": statistics.median(pass_speedups) if pass_speedups else None,
        "speedup_max": pass_speedups[-1] if pass_speedups else None,
        "speedup_median_faster": statistics.median(faster_speedups) if faster_speedups else None,
        "geomean_speedup_correct": _geomean(correct_speedups),
        "n_geomean_correct": len(correct_speedups),
        "geomean_speedup_verified": _geomean(pass_speedups),
        "failure_categories": dict(sorted(categories.items(), key=lambda kv: (-kv[1], kv[0]))),
        "fast_p": fast_p,
        "log2_histogram": _histogram(pass_speedups),
    }


def _view(
    results: Sequence[Mapping[str, Any]],
    problem_set: Sequence[str],
    family_of: Mapping[str, str],
    thresholds: Sequence[float],
) -> dict:
    figures = _figures(results, problem_set, thresholds)
    families = sorted(set(family_of.values()))
    figures["by_family"] = {
        family: _figures(
            [r for r in results if r["family"] == family],
            [p for p in problem_set if family_of.get(p) == family],
            thresholds,
        )
        for family in families
    }
    return figures


def summarize(
    records: Iterable[Mapping[str, Any]],
    problems: Iterable[str] | Mapping[str, str] | None = None,
    *,
    fast_p_thresholds: Sequence[float] = FAST_P_THRESHOLDS,
) -> dict:
    """Summarize a run's records (see the module docstring for every figure).

    Args:
        records: record dicts as :func:`kbenv.records.read_records` returns them.
        problems: the problem set that fast_p and the per-family fast_p are taken over. Records of problems
            outside it are left out of every figure (as the paper leaves out its four uninformative
            problems) and counted in ``n_records_excluded``. A mapping ``{problem: family}`` also places
            missing problems in their family. None: the problems seen in the records.
        fast_p_thresholds: the p values of fast_p.

    Returns:
        A JSON-safe dict: run-level counts (``n_records``, ``n_records_excluded``, ``n_problems``,
        ``n_problems_seen``, ``problems_missing``, ``n_episodes`` (distinct problem/episode pairs),
        ``n_results``, ``speedup_basis`` (``"gpu"``, ``"cpu-interpreter"``, ``"mixed"`` or ``"none"``),
        ``fast_p_thresholds``), and the figures for the ``"final"`` and ``"best"`` views.

    Raises:
        ValueError: a record lacks a field the figures need, has a speedup that is not finite and > 0, or
            one problem's records name different families.
    """
    all_records = list(records)
    if problems is None:
        wanted = None
    else:
        if isinstance(problems, str):
            raise TypeError("problems is a collection of problem ids, not one id")
        wanted = dict(problems) if isinstance(problems, Mapping) else {p: None for p in problems}

    kept = [r for r in all_records if wanted is None or r.get("problem") in wanted]
    finals = final_results(kept)
    bests = best_results(kept)

    family_of: dict[str, str] = {}
    for record in kept:
        known = family_of.setdefault(record["problem"], record["family"])
        if known != record["family"]:
            raise ValueError(f"problem {record['problem']!r} has records in families {known!r} and {record['family']!r}")
    seen = sorted(family_of)
    family_seen = set(seen)
    if wanted is None:
        problem_set = seen
    else:
        problem_set = sorted(wanted)
        for problem, family in wanted.items():
            if family is None:
                continue
            if family_of.get(problem, family) != family:
                raise ValueError(
                    f"problems maps {problem!r} to family {family!r}, its records say {family_of[problem]!r}"
                )
            family_of[problem] = family

    meaningful = {bool(r["speedup_meaningful"]) for r in kept}
    basis = {frozenset(): "none", frozenset({True}): "gpu", frozenset({False}): "cpu-interpreter"}.get(
        frozenset(meaningful), "mixed"
    )
    thresholds = tuple(float(p) for p in fast_p_thresholds)
    return {
        "n_records": len(kept),
        "n_records_excluded": len(all_records) - len(kept),
        "n_problems": len(problem_set),
        "n_problems_seen": len(seen),
        "problems_missing": [p for p in problem_set if p not in family_seen],
        "n_episodes": len({(r["problem"], r["episode"]) for r in kept}),
        "n_results": len(finals),
        "speedup_basis": basis,
        "fast_p_thresholds": list(thresholds),
        "final": _view(list(finals.values()), problem_set, family_of, thresholds),
        "best": _view(list(bests.values()), problem_set, family_of, thresholds),
        "pace": _pace(kept),
        "timing": _timing(kept),
    }


def _pace(records: list) -> dict | None:
    """Completion rate from the records' own times: (n - 1) evaluations between the first and the last record.
    Needs no end-of-run bookkeeping, so a run that was cut short still has one. None below two records."""
    times = sorted(float(r["time"]) for r in records if isinstance(r.get("time"), (int, float)))
    if len(times) < 2 or times[-1] <= times[0]:
        return None
    span = times[-1] - times[0]
    return {"evaluations": len(times), "span_s": round(span, 3),
            "evaluations_per_min": round(60 * (len(times) - 1) / span, 2)}


def _timing(records: list) -> dict | None:
    """The timing budgets the records were timed under (``timings.budget_s``: ``--timing-budget``) and why their
    rounds ended (``timings.stopped_by``), each with its count. None where no record was timed. Speedups timed under
    different budgets differ in noise, so a run that mixes them is flagged in the report."""
    budgets: dict[str, int] = {}
    stopped: dict[str, int] = {}
    for r in records:
        t = r.get("timings") or {}
        if isinstance(t.get("budget_s"), (int, float)):
            key = f"{float(t['budget_s']):g}"
            budgets[key] = budgets.get(key, 0) + 1
        if t.get("stopped_by"):
            stopped[str(t["stopped_by"])] = stopped.get(str(t["stopped_by"]), 0) + 1
    if not budgets and not stopped:
        return None
    return {"budgets_s": dict(sorted(budgets.items(), key=lambda kv: float(kv[0]))), "stopped_by": stopped}


def _fmt_pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _fmt_x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


def _fmt_count_pct(count: int, pct: float | None, total: int) -> str:
    return f"{_fmt_pct(pct)} ({count}/{total})"


def _text_histogram(bins: Sequence[Mapping[str, Any]], width: int = 40) -> list[str]:
    if not bins:
        return ["  (no verified-correct results with a speedup)"]
    peak = max(b["count"] for b in bins) or 1
    lines = []
    for b in reversed(bins):  # fastest first; a bin holds lo <= speedup < hi
        label = f"{b['lo_x']:.3g}x-{b['hi_x']:.3g}x"
        bar = "#" * math.ceil(width * b["count"] / peak) if b["count"] else ""
        lines.append(f"  {label:>15} | {bar:<{width}} {b['count']}")
        if b["lo_log2"] == 0 and b is not bins[0]:
            lines.append(f"  {'1x':>15} +{'-' * (width + 1)}")
    return lines


def format_report(summary: Mapping[str, Any]) -> str:
    """A plain-text report of a :func:`summarize` result: the headline table (final and best turn), fast_p,
    per-family rows, failure categories and a text histogram of log2 speedups."""
    final, best = summary["final"], summary["best"]
    lines = [
        f"kbenv run report: {summary['n_problems']} problems "
        f"({len(summary['problems_missing'])} missing), {summary['n_episodes']} episodes, "
        f"{summary['n_results']} results, {summary['n_records']} records"
        + (f" ({summary['n_records_excluded']} outside the problem set left out)" if summary["n_records_excluded"] else "")
    ]
    pace = summary.get("pace")
    if pace:
        lines.append(f"Pace: {pace['evaluations_per_min']:.1f} evaluations/min ({pace['evaluations'] - 1} completed in "
                     f"the {pace['span_s']:.1f} s between the first and the last record)")
    timing = summary.get("timing")
    if timing:
        budgets = ", ".join(f"{b} s ({n})" for b, n in timing["budgets_s"].items()) or "not recorded"
        ends = ", ".join(f"{k} {n}" for k, n in sorted(timing["stopped_by"].items()))
        lines.append(f"Timing budget: {budgets}" + (f"; rounds ended by: {ends}" if ends else ""))
        if len(timing["budgets_s"]) > 1:
            lines.append(_MIXED_BUDGET_NOTE)
    basis = summary["speedup_basis"]
    if basis == "cpu-interpreter":
        lines.append(_CPU_NOTE)
    elif basis == "mixed":
        lines.append(_MIXED_NOTE)
    if summary["problems_missing"]:
        shown = ", ".join(summary["problems_missing"][:10])
        more = len(summary["problems_missing"]) - 10
        lines.append(f"Missing (no record; count as failures in fast_p): {shown}" + (f" and {more} more" if more > 0 else ""))
    lines.append("")

    rows = [
        ("correct", lambda f: _fmt_count_pct(f["correct"], f["correct_pct"], f["n_results"])),
        ("verified (pass)", lambda f: _fmt_count_pct(f["passed"], f["pass_pct"], f["n_results"])),
        ("faster (pass, >1x)", lambda f: _fmt_count_pct(f["faster"], f["faster_pct"], f["n_results"])),
        ("verified speedups", lambda f: str(f["verified_speedups"])),
        ("median speedup (pass)", lambda f: _fmt_x(f["speedup_median"])),
        ("median speedup (faster)", lambda f: _fmt_x(f["speedup_median_faster"])),
        ("max speedup (pass)", lambda f: _fmt_x(f["speedup_max"])),
        ("geomean speedup (correct)", lambda f: _fmt_x(f["geomean_speedup_correct"])),
        ("geomean speedup (pass)", lambda f: _fmt_x(f["geomean_speedup_verified"])),
    ]
    for p in summary["fast_p_thresholds"]:
        label = _p_label(p)
        rows.append((f"fast_{label} (of {summary['n_problems']} problems)", lambda f, k=label: _fmt_pct(
            None if f["fast_p"][k] is None else 100.0 * f["fast_p"][k])))
    name_width = max(len(name) for name, _ in rows)
    lines.append(f"{'':<{name_width}}  {'final turn':>16}  {'best turn':>16}")
    for name, cell in rows:
        lines.append(f"{name:<{name_width}}  {cell(final):>16}  {cell(best):>16}")

    if final["by_family"]:
        lines += ["", "Per family (final turn):"]
        fast_labels = [_p_label(p) for p in summary["fast_p_thresholds"]]
        header = f"  {'family':<16} {'problems':>8} {'results':>7} {'correct':>8} {'faster':>8} {'median':>9} {'max':>9}"
        header += "".join(f" {'fast_' + k:>8}" for k in fast_labels)
        lines.append(header)
        for family, f in final["by_family"].items():
            row = (
                f"  {family:<16} {f['n_problems']:>8} {f['n_results']:>7} {_fmt_pct(f['correct_pct']):>8} "
                f"{_fmt_pct(f['faster_pct']):>8} {_fmt_x(f['speedup_median']):>9} {_fmt_x(f['speedup_max']):>9}"
            )
            row += "".join(
                f" {_fmt_pct(None if f['fast_p'][k] is None else 100.0 * f['fast_p'][k]):>8}" for k in fast_labels
            )
            lines.append(row)

    lines += ["", "Failure categories (final turn):"]
    if final["failure_categories"]:
        for category, count in final["failure_categories"].items():
            lines.append(f"  {category:<18} {count}")
    else:
        lines.append("  (none)")

    lines += ["", "Speedups of verified-correct results (final turn), log2 bins" + (
        " [CPU-interpreter timings]" if basis == "cpu-interpreter" else "") + ":"]
    lines += _text_histogram(final["log2_histogram"])
    return "\n".join(lines) + "\n"


def _times_label(x: float, _pos=None) -> str:
    return f"{x:g}\u00d7"


def speedup_figure(
    records: Iterable[Mapping[str, Any]],
    *,
    problems: Iterable[str] | Mapping[str, str] | None = None,
    view: str = "final",
):
    """The report's figure (a matplotlib ``Figure``, no pyplot state): two panels side by side.

    Left: verified-correct (verdict pass) speedups as a histogram on a log axis labelled in × (0.5×, 1×, 2×),
    with a dashed line at 1×. Right: failed results by category (horizontal bars, most frequent on top). The
    legend sits below the panels, clear of the data. ``view`` and ``problems`` are as in :func:`summarize`.
    """
    if view not in ("final", "best"):
        raise ValueError(f"view must be 'final' or 'best', got {view!r}")
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter
    except ImportError as exc:
        raise ImportError(
            "plot_speedups needs matplotlib (pip install 'matplotlib==3.10.*'); "
            "format_report includes a text histogram without it"
        ) from exc

    summary = summarize(records, problems)
    figures = summary[view]
    bins = figures["log2_histogram"]
    failures = figures["failure_categories"]

    fig = Figure(figsize=(7, 4), dpi=100)
    grid = fig.add_gridspec(1, 2, width_ratios=(3, 2))
    ax = fig.add_subplot(grid[0])
    fail_ax = fig.add_subplot(grid[1])
    if bins:
        ax.bar([b["lo_x"] for b in bins], [b["count"] for b in bins],
               width=[b["hi_x"] - b["lo_x"] for b in bins], align="edge", edgecolor="black", color="tab:blue",
               label="verified-correct results")
        lo, hi = min(bins[0]["lo_x"], 0.5), max(bins[-1]["hi_x"], 2.0)
        ax.set_ylim(0, max(b["count"] for b in bins) * 1.15)
    else:
        ax.text(0.5, 0.5, "no verified-correct results", transform=ax.transAxes, ha="center", va="center")
        lo, hi = 0.5, 2.0
    ax.set_xscale("log", base=2)
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_locator(LogLocator(base=2))
    ax.xaxis.set_major_formatter(FuncFormatter(_times_label))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.axvline(1.0, color="red", linestyle="--", label="1\u00d7 (baseline)")
    ax.set_xlabel("speedup over baseline (log scale)")
    ax.set_ylabel("results")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    n_pass = sum(b["count"] for b in bins)
    title = f"Verified speedups ({view} turn, n={n_pass})"
    if summary["speedup_basis"] == "cpu-interpreter":
        title += "\nCPU-interpreter timings, not GPU figures"
    elif summary["speedup_basis"] == "mixed":
        title += "\nWARNING: mixes GPU and CPU-interpreter timings"
    ax.set_title(title, fontsize=9)

    if failures:
        names = list(failures)[::-1]  # most frequent on top
        fail_ax.barh(names, [failures[n] for n in names], color="tab:orange", edgecolor="black")
        fail_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        fail_ax.tick_params(axis="y", labelsize=8)
    else:
        fail_ax.text(0.5, 0.5, "no failures", transform=fail_ax.transAxes, ha="center", va="center")
        fail_ax.set_yticks([])
    fail_ax.set_xlabel("results")
    fail_ax.set_title(f"Failures by category (n={sum(failures.values())})", fontsize=9)

    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), frameon=False, fontsize=8)
    fig.tight_layout(rect=(0, 0.07, 1, 1))  # the bottom strip is the legend's
    return fig


def plot_speedups(
    records: Iterable[Mapping[str, Any]],
    path: str | os.PathLike,
    *,
    problems: Iterable[str] | Mapping[str, str] | None = None,
    view: str = "final",
) -> Path:
    """Save :func:`speedup_figure` as a 700x400 PNG and return the path written.

    Needs matplotlib (only imported here); :func:`format_report` carries a text histogram for when it is absent.
    """
    out = Path(path)
    speedup_figure(records, problems=problems, view=view).savefig(out, format="png")
    return out

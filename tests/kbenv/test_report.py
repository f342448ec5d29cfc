"""Report figures from a known record log, asserted exactly."""

import math

import pytest

from kbenv.records import RecordWriter, make_record, read_records
from kbenv.report import best_results, final_results, format_report, plot_speedups, summarize

FAMILY = {"p1": "matmul", "p2": "matmul", "p3": "activation", "p4": "activation", "p5": "norm", "p6": "norm",
          "p7": "conv"}
PROBLEMS = {f"kb/{p}": fam for p, fam in FAMILY.items()}  # p7 has no record: missing

# (problem, episode, sample, turn, verdict, correct, category, speedup)
ROWS = [
    ("p1", 0, 0, 0, "fail", False, "runtime", None),
    ("p1", 0, 0, 1, "pass", True, None, 1.5),           # final: pass 1.5 (not > 1.5)
    ("p2", 0, 0, 0, "pass", True, None, 0.8),           # final: correct but slower
    ("p2", 1, 0, 0, "fail", False, "inaccurate", None),
    ("p3", 0, 0, 0, "pass", True, None, 3.0),
    ("p4", 0, 0, 0, "fail", True, "timing_escape", 10.0),  # correct outputs, speedup not verified
    ("p5", 0, 0, 0, "pass", True, None, 2.5),           # best turn of p5 ...
    ("p5", 0, 0, 1, "fail", False, "compile", None),    # ... but the final turn broke it
    ("p6", 0, 0, 0, "fail", False, "inaccurate", None),
    ("p6", 0, 1, 0, "pass", True, None, 1.1),           # second sample of the same episode
]


def make_records(meaningful=False):
    out = []
    for problem, episode, sample, turn, verdict, correct, category, speedup in ROWS:
        result = {
            "problem": f"kb/{problem}", "family": FAMILY[problem], "device": "cpu", "gpu": None, "size": "small",
            "precision": "fp32", "candidate_sha256": "0" * 64, "verdict": verdict, "category": category,
            "reason": "test", "correct": correct, "reward": 0.0, "reward_fn": "speedup", "reward_components": {},
            "speedup": speedup, "speedup_meaningful": meaningful, "baseline": {}, "timings": {}, "checks": [],
            "error": None, "phase_seconds": {}, "facts": {},
        }
        out.append(make_record(result, run_id="r", policy="test", episode=episode, turn=turn, sample=sample,
                               time_s=0.0))
    return out


@pytest.fixture
def run_records(tmp_path):
    with RecordWriter(tmp_path) as writer:
        for r in make_records():
            writer.write(r)
    return read_records(tmp_path)


def test_run_level_counts(run_records):
    s = summarize(run_records, PROBLEMS)
    assert s["n_records"] == 10
    assert s["n_records_excluded"] == 0
    assert s["n_problems"] == 7
    assert s["n_problems_seen"] == 6
    assert s["problems_missing"] == ["kb/p7"]
    assert s["n_episodes"] == 7  # (problem, episode) pairs
    assert s["n_results"] == 8   # (problem, episode, sample)
    assert s["speedup_basis"] == "cpu-interpreter"


def test_final_turn_figures(run_records):
    f = summarize(run_records, PROBLEMS)["final"]
    assert f["n_results"] == 8
    assert (f["correct"], f["correct_pct"]) == (5, 62.5)
    assert (f["passed"], f["pass_pct"]) == (4, 50.0)
    assert (f["faster"], f["faster_pct"]) == (3, 37.5)
    assert f["verified_speedups"] == 3
    assert f["speedup_median"] == pytest.approx(1.3)        # of 0.8, 1.1, 1.5, 3.0
    assert f["speedup_max"] == 3.0
    assert f["speedup_median_faster"] == 1.5                 # of 1.1, 1.5, 3.0
    assert f["geomean_speedup_correct"] == pytest.approx((1.5 * 0.8 * 3.0 * 10.0 * 1.1) ** (1 / 5))
    assert f["n_geomean_correct"] == 5
    assert f["geomean_speedup_verified"] == pytest.approx((1.5 * 0.8 * 3.0 * 1.1) ** (1 / 4))
    assert f["failure_categories"] == {"inaccurate": 2, "compile": 1, "timing_escape": 1}
    assert list(f["failure_categories"]) == ["inaccurate", "compile", "timing_escape"]
    # Over 7 problems, p7 missing. p1's 1.5x is not > 1.5; p4's 10x was rejected; p6 counts through sample 1.
    assert f["fast_p"] == {"0": 4 / 7, "1": 3 / 7, "1.5": 1 / 7, "2": 1 / 7}


def test_best_turn_figures(run_records):
    b = summarize(run_records, PROBLEMS)["best"]
    assert (b["correct"], b["correct_pct"]) == (6, 75.0)
    assert (b["passed"], b["pass_pct"]) == (5, 62.5)
    assert (b["faster"], b["faster_pct"]) == (4, 50.0)
    assert b["speedup_median"] == 1.5   # of 0.8, 1.1, 1.5, 2.5, 3.0
    assert b["speedup_max"] == 3.0
    assert b["failure_categories"] == {"inaccurate": 2, "timing_escape": 1}
    assert b["fast_p"] == {"0": 5 / 7, "1": 4 / 7, "1.5": 2 / 7, "2": 2 / 7}


def test_per_family_figures(run_records):
    fam = summarize(run_records, PROBLEMS)["final"]["by_family"]
    assert list(fam) == ["activation", "conv", "matmul", "norm"]

    m = fam["matmul"]
    assert (m["n_problems"], m["n_results"], m["correct"], m["faster"]) == (2, 3, 2, 1)
    assert m["correct_pct"] == pytest.approx(200 / 3)
    assert m["faster_pct"] == pytest.approx(100 / 3)
    assert m["speedup_median"] == pytest.approx(1.15)
    assert m["speedup_max"] == 1.5
    assert m["fast_p"] == {"0": 1.0, "1": 0.5, "1.5": 0.0, "2": 0.0}

    a = fam["activation"]
    assert (a["n_problems"], a["n_results"], a["correct_pct"], a["faster_pct"]) == (2, 2, 100.0, 50.0)
    assert (a["speedup_median"], a["speedup_max"]) == (3.0, 3.0)
    assert a["failure_categories"] == {"timing_escape": 1}
    assert a["fast_p"] == {"0": 0.5, "1": 0.5, "1.5": 0.5, "2": 0.5}

    n = fam["norm"]
    assert (n["n_problems"], n["n_results"], n["correct"], n["faster"]) == (2, 3, 1, 1)
    assert n["speedup_median"] == 1.1
    assert n["failure_categories"] == {"compile": 1, "inaccurate": 1}
    assert n["fast_p"] == {"0": 0.5, "1": 0.5, "1.5": 0.0, "2": 0.0}

    c = fam["conv"]  # known only from the problems mapping: every figure empty, fast_p zero
    assert (c["n_problems"], c["n_results"], c["correct_pct"], c["speedup_median"]) == (1, 0, None, None)
    assert c["fast_p"] == {"0": 0.0, "1": 0.0, "1.5": 0.0, "2": 0.0}

    best_norm = summarize(run_records, PROBLEMS)["best"]["by_family"]["norm"]
    assert best_norm["fast_p"]["2"] == 0.5  # p5's 2.5x at turn 0


def test_problem_set_variants(run_records):
    # Without a problem set: the 6 problems seen.
    s = summarize(run_records)
    assert s["n_problems"] == 6 and s["problems_missing"] == []
    assert s["final"]["fast_p"]["1"] == 3 / 6
    assert list(s["final"]["by_family"]) == ["activation", "matmul", "norm"]

    # A plain list excludes records outside it (the paper's denominator convention) and counts a missing one.
    s = summarize(run_records, ["kb/p1", "kb/p2", "kb/p3", "kb/p9"])
    assert s["n_records_excluded"] == 5
    assert s["problems_missing"] == ["kb/p9"]
    assert s["final"]["n_results"] == 4
    assert s["final"]["fast_p"] == {"0": 3 / 4, "1": 2 / 4, "1.5": 1 / 4, "2": 1 / 4}

    with pytest.raises(ValueError, match="family"):
        summarize(run_records, {**PROBLEMS, "kb/p1": "conv"})
    with pytest.raises(TypeError):
        summarize(run_records, "kb/p1")


def test_final_and_best_selection():
    rows = make_records()
    finals = final_results(rows)
    bests = best_results(rows)
    assert finals[("kb/p5", 0, 0)]["turn"] == 1 and bests[("kb/p5", 0, 0)]["turn"] == 0
    assert finals[("kb/p1", 0, 0)]["turn"] == 1 and bests[("kb/p1", 0, 0)]["turn"] == 1
    # A repeated turn (e.g. re-run after a resume): the one written last is the final one.
    again = dict(rows[1], speedup=2.0)
    assert final_results(rows + [again])[("kb/p1", 0, 0)]["speedup"] == 2.0


def test_bad_records_raise():
    rows = make_records()
    with pytest.raises(ValueError, match="lacks field"):
        summarize([{k: v for k, v in rows[0].items() if k != "turn"}])
    with pytest.raises(ValueError, match="finite and > 0"):
        summarize([dict(rows[1], speedup=0.0)])
    with pytest.raises(ValueError, match="finite and > 0"):
        summarize([dict(rows[1], speedup=math.inf)])
    with pytest.raises(ValueError, match="families"):
        summarize([rows[0], dict(rows[1], family="norm")])


def test_format_report(run_records):
    text = format_report(summarize(run_records, PROBLEMS))
    assert "7 problems (1 missing), 7 episodes, 8 results, 10 records" in text
    assert "CPU-interpreter figures" in text and "not GPU figures" in text
    assert "kb/p7" in text
    lines = text.splitlines()

    def row(name):
        return next(line for line in lines if line.startswith(name))

    assert row("correct").split() == ["correct", "62.5%", "(5/8)", "75.0%", "(6/8)"]
    assert row("faster (pass, >1x)").split()[-4:] == ["37.5%", "(3/8)", "50.0%", "(4/8)"]
    assert row("median speedup (pass)").split()[-2:] == ["1.300x", "1.500x"]
    assert row("max speedup (pass)").split()[-2:] == ["3.000x", "3.000x"]
    assert row("fast_1.5 ").split()[-2:] == ["14.3%", "28.6%"]
    assert row("  matmul").split()[1:7] == ["2", "3", "66.7%", "33.3%", "1.150x", "1.500x"]
    assert row("  inaccurate").split() == ["inaccurate", "2"]

    # Text histogram of log2 speedups, bins of sqrt(2); 1x is a bin edge. Final pass speedups: 0.8, 1.1, 1.5, 3.0.
    start = lines.index(next(line for line in lines if line.startswith("Speedups of verified-correct")))
    hist = [line.split("|") if "|" in line else line.split("+") for line in lines[start + 1:]]
    assert [(label.strip(), rest.split()[-1]) for label, rest in hist] == [
        ("2.83x-4x", "1"), ("2x-2.83x", "0"), ("1.41x-2x", "1"), ("1x-1.41x", "1"), ("1x", "-" * 41), ("0.707x-1x", "1"),
    ]


def test_report_without_cpu_note_for_gpu_records(tmp_path):
    s = summarize(make_records(meaningful=True), PROBLEMS)
    assert s["speedup_basis"] == "gpu"
    assert "CPU-interpreter" not in format_report(s)
    mixed = make_records(meaningful=True)[:5] + make_records(meaningful=False)[5:]
    s = summarize(mixed, PROBLEMS)
    assert s["speedup_basis"] == "mixed"
    assert "WARNING" in format_report(s)


def test_plot_is_a_png(run_records, tmp_path):
    out = plot_speedups(run_records, tmp_path / "speedups.png", problems=PROBLEMS)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    image = matplotlib.image.imread(out)
    assert image.shape[0] == 400 and image.shape[1] == 700  # figsize 7x4 at 100 dpi

    empty = plot_speedups([r for r in run_records if r["verdict"] == "fail"], tmp_path / "empty.png")
    assert empty.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="view"):
        plot_speedups(run_records, tmp_path / "x.png", view="worst")


def test_pace_from_record_times():
    records = make_records()
    for k, r in enumerate(records):
        r["time"] = 1000.0 + 6.0 * k  # one evaluation every 6 s
    s = summarize(records, PROBLEMS)
    assert s["pace"] == {"evaluations": 10, "span_s": 54.0, "evaluations_per_min": 10.0}
    assert "Pace: 10.0 evaluations/min" in format_report(s)


def test_no_pace_when_all_records_share_one_time(run_records):
    s = summarize(run_records, PROBLEMS)  # time_s=0.0 on every record
    assert s["pace"] is None
    assert "Pace:" not in format_report(s)


def test_plot_shows_speedups_on_a_log_axis_in_times_and_failures_beside_them(run_records):
    from kbenv.report import speedup_figure
    fig = speedup_figure(run_records, problems=PROBLEMS)
    speed_ax, fail_ax = fig.axes
    assert speed_ax.get_xscale() == "log"
    fig.canvas.draw()
    ticks = [t.get_text() for t in speed_ax.get_xticklabels() if t.get_text()]
    assert "1\u00d7" in ticks and "2\u00d7" in ticks and all(t.endswith("\u00d7") for t in ticks)
    fails = summarize(run_records, PROBLEMS)["final"]["failure_categories"]
    assert [t.get_text() for t in fail_ax.get_yticklabels()] == list(fails)[::-1]
    assert [round(p.get_width()) for p in fail_ax.patches] == list(fails.values())[::-1]
    # the legend sits outside both panels: it overlaps no bar
    legend = fig.legends[0].get_window_extent()
    for ax in fig.axes:
        assert not legend.overlaps(ax.get_window_extent())


def test_timing_budgets_and_why_rounds_ended_are_summarized_and_a_mix_is_flagged():
    records = make_records()
    for k, r in enumerate(records):
        r["timings"] = {"budget_s": 3.0, "stopped_by": "budget" if k % 2 else "interval"}
    s = summarize(records, PROBLEMS)
    assert s["timing"] == {"budgets_s": {"3": 10}, "stopped_by": {"interval": 5, "budget": 5}}
    text = format_report(s)
    assert "Timing budget: 3 s (10); rounds ended by: budget 5, interval 5" in text and "WARNING" not in text
    records[0]["timings"]["budget_s"] = 1.5
    s = summarize(records, PROBLEMS)
    assert s["timing"]["budgets_s"] == {"1.5": 1, "3": 9}
    assert "different timing budgets" in format_report(s)
    assert summarize(make_records(), PROBLEMS)["timing"] is None  # nothing timed

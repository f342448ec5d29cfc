"""Measure the trusted side's working memory for the correctness checks of one trial, against memplan's figure.

    python benchmarks/memplan_checks.py [--device cpu|cuda] [--elements N ...] [--problems ID ...]

For each problem (its reference run at a size scaled so that its first output has about N elements), it builds
the trusted inputs and reference outputs, two candidate outputs (copies of the reference, as an honest
candidate returns), and runs ``rewards.verdict.correctness_checks`` exactly as the supervisor does. It prints
the memory the checks took beyond the tensors already held (on cuda: the allocator's peak; on cpu: the growth
of the process's peak resident set, measured in a fresh process per row) next to
``memplan.check_work_bytes``, which must not be smaller.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

import torch


def _rss_peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Reset the process's peak resident set to its current one (Linux: ``echo 5 > /proc/self/clear_refs``), so
    the checks' own peak is measured even when an earlier phase (the forward) peaked higher."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def scale_to_elements(problem, elements: int) -> dict:
    """Overrides that scale the problem's leading size constant (the first one its ``small`` size names) so
    that its outputs hold about ``elements`` elements (outputs grow linearly with it in these problems)."""
    from kbenv.sandbox import memplan

    key = next(iter(problem.small))
    full = problem.namespace("full")[key]
    fp = memplan.footprint(problem, "full", "fp32")
    if fp.output_elements < 1024:  # a scalar (a loss): its checks are trivial; measure it at its small size
        return dict(problem.small)
    value = max(1, round(full * elements / max(fp.output_elements, 1)))
    return {key: min(value, full)}


def measure(problem_id: str, elements: int, device: str, precision: str) -> dict:
    from kbenv.problems import PRECISIONS, get_problem, load_namespace, make_inputs, make_model
    from kbenv.rewards.verdict import Trial, correctness_checks
    from kbenv.sandbox import memplan

    p = get_problem(problem_id)
    size_over = scale_to_elements(p, elements)
    ns = load_namespace(p.source, str(p.path), size_over)
    dtype = PRECISIONS[precision]
    inputs = make_inputs(ns, 1, "default", device, dtype, p.broad_inputs)
    model = make_model(ns, "Model", 42, device, dtype)
    with torch.no_grad():
        out = model(*inputs)
    refs = list(out) if isinstance(out, (tuple, list)) else [out]
    outs_a = [r.clone() for r in refs]
    outs_b = [r.clone() for r in refs]
    metas = [{"type": "torch.Tensor"} for _ in refs]
    del model, out
    out_bytes = sum(r.numel() * r.element_size() for r in refs)
    out_elements = sum(r.numel() for r in refs)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    else:
        reset = _reset_peak()
        base = _status_bytes("VmRSS") if reset else _rss_peak_bytes()
    trial = Trial("default", inputs, refs, outs_a, outs_b, metas, 0xFE, 0x7F, None)
    correctness_checks(trial, precision, p.invariants, p.tolerance)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        used = torch.cuda.max_memory_allocated() - base
    else:
        used = (_status_bytes("VmHWM") if reset else _rss_peak_bytes()) - base
    fp = memplan.footprint(p, "full", precision, overrides=size_over)
    return {"problem": problem_id, "precision": precision, "output_elements": out_elements,
            "output_bytes": out_bytes, "check_work_measured": used,
            "check_work_planned": memplan.check_work_bytes(fp)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--elements", type=int, nargs="+", default=[1 << 24, 1 << 26])
    ap.add_argument("--problems", nargs="+", default=[
        "kernelbench/level1/19", "kernelbench/level1/23", "kernelbench/level1/33", "kernelbench/level1/37",
        "kernelbench/level1/1", "kernelbench/level1/42", "kernelbench/level1/89", "kernelbench/level1/51"])
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # problem, elements: one row in this process
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]), args.device, args.precision)))
        return 0
    print(f"{'problem':26s} {'prec':5s} {'out elems':>12s} {'out MiB':>9s} {'checks MiB':>11s} {'planned MiB':>12s}")
    bad = 0
    for pid in args.problems:
        for n in args.elements:
            # A fresh process per row on the cpu: the peak resident set only grows.
            cmd = [sys.executable, __file__, "--device", args.device, "--precision", args.precision,
                   "--one", pid, str(n)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                print(f"{pid}: failed: {r.stderr.strip().splitlines()[-1:]}")
                bad += 1
                continue
            d = json.loads(r.stdout.strip().splitlines()[-1])
            ok = d["check_work_planned"] >= d["check_work_measured"]
            bad += not ok
            print(f"{pid:26s} {d['precision']:5s} {d['output_elements']:12d} {d['output_bytes'] / 2**20:9.0f} "
                  f"{d['check_work_measured'] / 2**20:11.0f} {d['check_work_planned'] / 2**20:12.0f}"
                  f"{'' if ok else '  PLAN TOO SMALL'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

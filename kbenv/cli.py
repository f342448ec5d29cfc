"""The ``kbenv`` command.

    kbenv demo                                   the main job: known-good and known-bad policies, end to end
    kbenv problems list [--set S] [--json]       every problem id
    kbenv problems show ID [--json]              source, shapes, family, invariants, floor
    kbenv audit [--set S] [--precision P] [--device D] [--size Z] [--ids 1-60]
    kbenv eval --problem ID --kernel FILE [--device D] [--size Z] [--precision P] [--json]
    kbenv baselines build [--set S] [--size Z] [--precision P] [--device D]
    kbenv rollout --policy P [--problems ...] [--turns N] [--gpus N] [--out RUN]
    kbenv report RUN [--plot PNG] [--json]       Table-1-style summary of a run
    kbenv export RUN OUT.jsonl                   records as JSON lines
    kbenv profile WORKLOAD --mode train|infer    workload profile (addressable fraction)
    kbenv project RUN --profile P                the paper's Eq. 1 projection from a run

Exit status: 0 when the command completed (whatever a candidate did), 1 for a harness fault, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path


def _cpu_env() -> None:
    # Triton's interpreter must be chosen before any @triton.jit runs; only when this machine has no GPU.
    try:
        import torch
        if not torch.cuda.is_available():
            os.environ.setdefault("TRITON_INTERPRET", "1")
    except ImportError:
        pass
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_SCHEDULER_EVENTS", "0")


def _add_config(p: argparse.ArgumentParser, cls) -> None:
    """One flag per dataclass field; the field's docstring (the line after it in the source) is its help."""
    import inspect
    src = inspect.getsource(cls).splitlines()
    docs = {}
    for i, line in enumerate(src):
        s = line.strip()
        if ":" in s and "=" in s and not s.startswith(("#", '"')) and i + 1 < len(src):
            nxt = src[i + 1].strip()
            if nxt.startswith('"""'):
                docs[s.split(":")[0]] = nxt.strip('"')
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        if f.type in (bool, "bool"):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=docs.get(f.name))
        else:
            typ = {"int": int, "float": float}.get(f.type if isinstance(f.type, str) else f.type.__name__, str)
            p.add_argument(flag, type=typ, default=f.default, help=docs.get(f.name))


def _parse_ids(spec: str | None) -> set[int] | None:
    if not spec:
        return None
    out: set[int] = set()
    for part in spec.split(","):
        if "-" in part:
            a, b = part.split("-")
            out |= set(range(int(a), int(b) + 1))
        else:
            out.add(int(part))
    return out


def cmd_problems(args) -> int:
    from kbenv.problems import get_problem, list_problems
    if args.action == "list":
        probs = list_problems(args.set)
        if args.json:
            print(json.dumps([{"id": p.id, "name": p.name, "family": p.family} for p in probs], indent=1))
        else:
            for p in probs:
                print(f"{p.id:28s} {p.family:15s} {p.name}")
        return 0
    p = get_problem(args.id)
    d = p.describe()
    d["shapes"] = problem_shapes(p)
    if args.json:
        print(json.dumps({**d, "source": p.source}, indent=1))
        return 0
    print(p.source)
    for k in ("id", "family", "invariants", "domains", "precision", "small", "floor", "shapes"):
        print(f"{k}: {json.dumps(d.get(k))}")
    return 0


def problem_shapes(p) -> dict:
    import torch

    from kbenv.problems import load_namespace
    ns = load_namespace(p.source, str(p.path))
    with torch.device("meta"):
        inputs = ns["get_inputs"]()
    full = [list(x.shape) if isinstance(x, torch.Tensor) else x for x in inputs]
    ns = p.namespace("small")
    with torch.device("meta"):
        inputs = ns["get_inputs"]()
    small = [list(x.shape) if isinstance(x, torch.Tensor) else x for x in inputs]
    return {"full": full, "small": small, "init": ns["get_init_inputs"]()}


def cmd_audit(args) -> int:
    from kbenv.audit import audit, format_audit
    rows = audit(set_name=args.set, precision=args.precision, device=args.device, size=args.size,
                 ids=_parse_ids(args.ids))
    print(json.dumps(rows, indent=1) if args.json else format_audit(rows, args.precision))
    return 0


def cmd_eval(args) -> int:
    from kbenv.prompts import extract_code
    from kbenv.sandbox.result import EvalRequest, EvalResult
    from kbenv.sandbox.supervisor import Supervisor
    from kbenv.problems import get_problem
    text = Path(args.kernel).read_text()
    code = extract_code(text) if "```" in text else text
    device = args.device or ("cuda" if _has_cuda() else "cpu")
    size = args.size or ("full" if device.startswith("cuda") else "small")
    prob = get_problem(args.problem)
    if code is None:
        res = EvalResult.format_failure(EvalRequest(problem=prob.id, candidate=text, size=size), prob,
                                        args.precision or prob.precision_default, device, "no ModelNew found")
    else:
        sup = Supervisor(device=device, sandbox=args.sandbox, keep_spare=False)
        try:
            res = sup.evaluate(EvalRequest(problem=prob.id, candidate=code, size=size, precision=args.precision,
                                           reward_fn=args.reward, profile=args.profile, measure_time=not args.no_time))
        finally:
            sup.close()
    d = res.to_dict()
    if args.json:
        print(json.dumps(d, indent=1, default=str))
    else:
        from kbenv.env import format_feedback
        print(format_feedback(res))
        print(f"reward ({d['reward_fn']}): {d['reward']:.6g}")
    return 0


def _has_cuda() -> bool:
    import torch
    return torch.cuda.is_available()


def cmd_baselines(args) -> int:
    from kbenv.problems import list_problems
    from kbenv.sandbox.supervisor import Supervisor
    device = args.device or ("cuda" if _has_cuda() else "cpu")
    size = args.size or ("full" if device.startswith("cuda") else "small")
    sup = Supervisor(device="cuda:0" if device == "cuda" else device, keep_spare=False)  # same cache and protocol
    ids = _parse_ids(args.ids)
    probs = [p for p in list_problems(args.set) if not ids or p.number in ids]
    items = [(p, size, args.precision or p.precision_default) for p in probs]
    sup.baselines.prefetch(items)
    for p, z, prec in items:
        b = sup.baselines.get(p, z, prec)
        print(f"{p.id:28s} {prec} eager {b['eager_ms']:.4f} ms  compile {b.get('compile_ms') or float('nan'):.4f} ms"
              f"  best {b['best']}")
    sup.close()
    return 0


def cmd_rollout(args) -> int:
    from kbenv.report import format_report, summarize
    from kbenv.records import read_metadata, read_records
    from kbenv.rollout import RolloutConfig, run_rollout
    cfg = RolloutConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(RolloutConfig)})
    run_dir = run_rollout(cfg)
    print(f"run: {run_dir}")
    last = (read_metadata(run_dir) or {}).get("last_session") or {}
    if last.get("evaluations"):
        print(f"{last['evaluations']} evaluations in {last['wall_s']:.1f} s on {last['evaluators']} evaluator(s): "
              f"{last['evaluations_per_min']:.1f} evaluations/min (policy, sandbox and verifier included)")
    print(format_report(summarize(read_records(run_dir))))
    return 0


def cmd_report(args) -> int:
    from kbenv.records import read_records
    from kbenv.report import format_report, plot_speedups, summarize
    recs = read_records(args.run)
    summ = summarize(recs)
    print(json.dumps(summ, indent=1, default=str) if args.json else format_report(summ))
    if args.plot:
        plot_speedups(recs, args.plot)
        print(f"plot: {args.plot}")
    return 0


def cmd_export(args) -> int:
    from kbenv.records import export_jsonl
    n = export_jsonl(args.run, args.out)
    print(f"{n} records -> {args.out}")
    return 0


def cmd_profile(args) -> int:
    from kbenv.rewards.profiler import profile_workload, save_profile
    device = args.device or ("cuda" if _has_cuda() else "cpu")
    prof = profile_workload(args.workload, args.mode, device=device, size=args.size)
    path = save_profile(prof, args.out or None)
    print(json.dumps({k: prof[k] for k in ("name", "buckets", "addressable_fraction", "unclassified_fraction")},
                     indent=1))
    print(f"profile: {path}")
    return 0


def cmd_project(args) -> int:
    from kbenv.project import project_run
    print(json.dumps(project_run(args.run, args.profile), indent=1))
    return 0


def cmd_demo(args) -> int:
    """The main job on an embedded default: known-good kernels and known exploits through the whole path."""
    from kbenv.records import read_records
    from kbenv.report import format_report, summarize
    from kbenv.rollout import RolloutConfig, run_rollout
    from kbenv.sandbox.actor import EvaluatorPool
    out = Path(args.out or "runs/demo")
    # Shorter phase limits than the defaults: the suite holds hangs and sleeps that run into them on purpose.
    pool = EvaluatorPool(device=args.device, config={"limits": {"compile_s": 60, "trial_s": 20, "timing_s": 120}})
    print(f"evaluators: {pool.info()}")
    run = out / "known-good"
    cfg = RolloutConfig(policy="known-good", problems=args.problems or "policy", turns=1, device=pool.device,
                        out=str(run), resume=run.exists(), progress=False)
    run_rollout(cfg, pool=pool)
    print(f"\n== known-good kernels: rollout {run} ==")
    print(format_report(summarize(read_records(run))))
    from kbenv.suite import format_suite, run_suite
    size = "full" if pool.device == "cuda" else "small"
    report = run_suite(pool, size, include_good=False)
    print("\n== known-bad suite: every exploit and fault through the same path ==")
    print(format_suite(report))
    pool.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kbenv", description="A non-gameable reward environment for GPU-kernel agents.")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("problems", help="list or show problems")
    psub = p.add_subparsers(dest="action", required=True)
    pl = psub.add_parser("list")
    pl.add_argument("--set", choices=["kernelbench", "dlrm"])
    pl.add_argument("--json", action="store_true")
    pl.add_argument("--kernelbench-dir", help="also register problems from an external KernelBench checkout")
    ps = psub.add_parser("show")
    ps.add_argument("id")
    ps.add_argument("--json", action="store_true")
    ps.add_argument("--kernelbench-dir")
    p.set_defaults(fn=cmd_problems)

    a = sub.add_parser("audit", help="does an all-zeros output pass KernelBench's allclose?")
    a.add_argument("--set", choices=["kernelbench", "dlrm"], default="kernelbench")
    a.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    a.add_argument("--device", choices=["cpu", "cuda"], default=None)
    a.add_argument("--size", choices=["small", "full"], default=None)
    a.add_argument("--ids", help="problem numbers, e.g. 1-60")
    a.add_argument("--json", action="store_true")
    a.add_argument("--kernelbench-dir")
    a.set_defaults(fn=cmd_audit)

    e = sub.add_parser("eval", help="evaluate one kernel file")
    e.add_argument("--problem", required=True)
    e.add_argument("--kernel", required=True, help="a .py candidate or a reply containing a ```python block")
    e.add_argument("--device", choices=["cpu", "cuda"])
    e.add_argument("--size", choices=["small", "full"])
    e.add_argument("--precision", choices=["fp32", "bf16"])
    e.add_argument("--reward", default="amdahl", choices=["amdahl", "speedup", "fast_p"])
    e.add_argument("--profile")
    e.add_argument("--sandbox", default="auto", choices=["auto", "bwrap", "none"])
    e.add_argument("--no-time", action="store_true", help="correctness only")
    e.add_argument("--json", action="store_true")
    e.add_argument("--kernelbench-dir")
    e.set_defaults(fn=cmd_eval)

    b = sub.add_parser("baselines", help="measure and cache eager/torch.compile baselines")
    b.add_argument("action", choices=["build"])
    b.add_argument("--set", choices=["kernelbench", "dlrm"])
    b.add_argument("--size", choices=["small", "full"])
    b.add_argument("--precision", choices=["fp32", "bf16"])
    b.add_argument("--device", choices=["cpu", "cuda"])
    b.add_argument("--ids")
    b.set_defaults(fn=cmd_baselines)

    from kbenv.rollout import RolloutConfig
    r = sub.add_parser("rollout", help="Ray-parallel rollout of a policy")
    _add_config(r, RolloutConfig)
    r.set_defaults(fn=cmd_rollout)

    rp = sub.add_parser("report", help="summarise a run")
    rp.add_argument("run")
    rp.add_argument("--plot")
    rp.add_argument("--json", action="store_true")
    rp.set_defaults(fn=cmd_report)

    ex = sub.add_parser("export", help="export a run's records as JSONL")
    ex.add_argument("run")
    ex.add_argument("out")
    ex.set_defaults(fn=cmd_export)

    pf = sub.add_parser("profile", help="profile a workload's GPU time by kernel bucket and op family")
    pf.add_argument("workload", choices=["dlrm", "resnet50", "gpt"])
    pf.add_argument("--mode", choices=["train", "infer"], required=True)
    pf.add_argument("--device", choices=["cpu", "cuda"])
    pf.add_argument("--size", default="full", choices=["full", "tiny"])
    pf.add_argument("--out")
    pf.set_defaults(fn=cmd_profile)

    pj = sub.add_parser("project", help="Eq. 1 projection of a run onto a workload profile")
    pj.add_argument("run")
    pj.add_argument("--profile", required=True)
    pj.set_defaults(fn=cmd_project)

    d = sub.add_parser("demo", help="the main job: known-good kernels and known exploits, end to end")
    d.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    d.add_argument("--out", default="")
    d.add_argument("--problems", default="")
    d.set_defaults(fn=cmd_demo)
    return ap


def main(argv=None) -> int:
    _cpu_env()
    ap = build_parser()
    args = ap.parse_args(argv)
    if getattr(args, "kernelbench_dir", None):
        from kbenv.problems import register_kernelbench_dir
        register_kernelbench_dir(args.kernelbench_dir)
    try:
        return args.fn(args)
    except (KeyError, ValueError, FileNotFoundError, FileExistsError) as e:
        print(f"kbenv: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

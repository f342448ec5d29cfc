"""The ``kbenv`` command.

    kbenv demo                                   the main job: known-good and known-bad policies, end to end
    kbenv problems list [--set S] [--json]       every problem id
    kbenv problems show ID [--json]              source, shapes, family, invariants, floor
    kbenv audit [--set S] [--precision P] [--device D] [--size Z] [--ids 1-60]
    kbenv eval --problem ID --kernel FILE [--device D] [--size Z] [--limit PHASE=S ...] [--json]
    kbenv redteam [--device D] [--sandbox M] [--limit PHASE=S ...] [--size Z]   the known-bad suite, your deployment
    kbenv baselines build [--set S] [--size Z] [--precision P] [--device D]
    kbenv rollout --policy P [--problems ...] [--turns N] [--evaluators N] [--out RUN]
    kbenv report RUN [--plot PNG] [--json]       Table-1-style summary of a run
    kbenv export RUN OUT.jsonl [--verified-only] records (or an SFT set) as JSON lines
    kbenv profile WORKLOAD --mode train|infer    workload profile (addressable fraction)
    kbenv project RUN --profile P                the paper's Eq. 1 projection from a run

Exit status (:data:`EXIT_CODES`): 0 when the command completed (whatever a candidate did), 1 for a harness
fault (with its traceback), 2 for a usage or environment mistake (one line naming the flag or file; the
traceback only with ``--debug``), 3 when ``kbenv redteam`` found a mismatch, 141 when the output pipe closed.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import threading
import traceback
from pathlib import Path

from kbenv.errors import PolicyFailed, UsageError

EXIT_OK, EXIT_HARNESS, EXIT_USAGE, EXIT_MISMATCH, EXIT_PIPE = 0, 1, 2, 3, 141

EXIT_CODES = f"""exit status:
  {EXIT_OK}    the command completed, whatever the candidate did (read its verdict)
  {EXIT_HARNESS}    a harness fault: a bug or failure of kbenv itself (its traceback is printed)
  {EXIT_USAGE}    a usage or environment mistake: a bad flag value, a missing or unreadable file, no CUDA GPU,
       an evaluation that would not fit in memory, an unreachable policy server (one line on stderr naming
       the flag or file; --debug adds the traceback)
  {EXIT_MISMATCH}    kbenv redteam only: a candidate's verdict differed from its expectation
  {EXIT_PIPE}  the output pipe was closed early (e.g. `| head`)"""

#: Exceptions that mean "the caller asked for something that cannot be done as asked": exit 2, one line.
USAGE_ERRORS = (UsageError, ValueError, KeyError, FileNotFoundError, FileExistsError, IsADirectoryError,
                NotADirectoryError, PermissionError, PolicyFailed, ConnectionError)


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


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Option help with its default (unless the help already says it, or there is none to say); descriptions and
    epilogs kept as written."""

    def _get_help_string(self, action):
        help = action.help or ""
        if "default" in help or action.default in (None, False, [], "", argparse.SUPPRESS) or not action.option_strings:
            return help
        return help + " (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line naming the argument (exit 2)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _sizes() -> tuple[str, ...]:
    from kbenv.step import SIZES
    return ("auto",) + tuple(SIZES)


def _shard(text: str) -> tuple[int, int]:
    """``K/N`` with 1 <= K <= N: the K-th of N even parts (``kbenv redteam --shard``)."""
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not K/N") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"{text!r}: K must be between 1 and N")
    return k, n


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
        ftype = f.type if isinstance(f.type, str) else f.type.__name__
        if ftype == "bool":
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=docs.get(f.name))
        elif ftype == "list":
            p.add_argument(flag, action="append", default=[], metavar="PHASE=SECONDS", help=docs.get(f.name))
        else:
            typ = {"int": int, "float": float}.get(ftype, str)
            p.add_argument(flag, type=typ, default=f.default, help=docs.get(f.name))


def _parse_ids(spec: str | None, flag: str = "--ids") -> set[int] | None:
    if not spec:
        return None
    out: set[int] = set()
    try:
        for part in spec.split(","):
            if "-" in part:
                a, b = part.split("-")
                out |= set(range(int(a), int(b) + 1))
            else:
                out.add(int(part))
    except ValueError:
        raise UsageError(flag, f"{spec!r} is not a list of problem numbers such as 1-60 or 19,23") from None
    return out


def _device(args) -> str:
    from kbenv.step import resolve_device
    return resolve_device(getattr(args, "device", None) or "auto")


def _size(args, device: str) -> str:
    from kbenv.step import resolve_size
    return resolve_size(getattr(args, "size", None), device)


def _problem(pid: str, flag: str = "--problem"):
    from kbenv.problems import get_problem
    try:
        return get_problem(pid)
    except KeyError:
        raise UsageError(flag, f"unknown problem {pid!r} (see kbenv problems list)") from None


def _read_text(path: str, flag: str) -> str:
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{flag} {path}", "no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{flag} {path}", "is a directory, not a file") from None
    except PermissionError:
        raise UsageError(f"{flag} {path}", "permission denied") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{flag} {path}", f"is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})"
                         ) from None


def _limits(args) -> dict:
    from kbenv.config import parse_limits
    return parse_limits(getattr(args, "limit", None) or [])


def _run_dir(path: str) -> Path:
    from kbenv.records import require_run
    return require_run(path)


class _Ticker:
    """A tqdm bar of elapsed seconds for one long call that reports no progress of its own."""

    def __init__(self, desc: str, enabled: bool = True):
        self.desc, self.enabled = desc, enabled

    def __enter__(self):
        if not self.enabled:
            return self
        from tqdm import tqdm
        self.bar = tqdm(desc=self.desc, total=None, unit="s", bar_format="{desc}: {elapsed} elapsed")
        self.stop = threading.Event()

        def tick():
            while not self.stop.wait(1.0):
                self.bar.refresh()
        self.thread = threading.Thread(target=tick, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self.stop.set()
            self.thread.join()
            self.bar.close()


# -- commands -------------------------------------------------------------------------------------------------

def cmd_problems(args) -> int:
    from kbenv.problems import list_problems
    if args.action == "list":
        probs = list_problems(args.set)
        if args.json:
            print(json.dumps([{"id": p.id, "name": p.name, "family": p.family} for p in probs], indent=1))
        else:
            for p in probs:
                print(f"{p.id:28s} {p.family:15s} {p.name}")
        return 0
    p = _problem(args.id, "ID")
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
    device = _device(args)
    rows = audit(set_name=args.set, precision=args.precision, device=device, size=_size(args, device),
                 ids=_parse_ids(args.ids))
    print(json.dumps(rows, indent=1) if args.json else format_audit(rows, args.precision))
    return 0


def cmd_eval(args) -> int:
    from kbenv import step
    from kbenv.sandbox.result import EvalRequest
    text = _read_text(args.kernel, "--kernel")
    prob = _problem(args.problem)
    device = _device(args)
    size = _size(args, device)
    limits = _limits(args)
    from kbenv.config import timing_overrides
    timing = timing_overrides(args.timing_budget)
    step.preflight([prob.id], size, args.precision, device)
    if "```" in text:  # a model's reply: the same extraction as every other path
        prepared = step.prepare(text, prob.id, size=size, device=device, precision=args.precision,
                                reward_fn=args.reward, profile=args.profile)
    else:  # a .py file is the candidate as it is
        prepared = step.Prepared(reply=text, code=text, request=EvalRequest(
            problem=prob.id, candidate=text, size=size, precision=args.precision, reward_fn=args.reward,
            profile=args.profile))
    if prepared.result is not None:
        res = prepared.result
    else:
        from kbenv.sandbox.supervisor import Supervisor
        prepared.request.measure_time = not args.no_time
        sup = Supervisor(device=device, sandbox=args.sandbox, keep_spare=False, limits=limits or None,
                         timing=timing or None)
        try:
            res = sup.evaluate(prepared.request)
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


@contextlib.contextmanager
def _suite_records(run_dir: Path | None, run_id: str):
    """An ``on_result`` for :func:`kbenv.suite.run_suite` that keeps every result whole (its facts and phase
    splits too) as a record under ``run_dir``, replacing an earlier run's (the suite is replayed whole each time);
    None without a ``run_dir``. ``kbenv report``, ``kbenv export`` and ``benchmarks/phase_split.py`` read them."""
    if run_dir is None:
        yield None
        return
    from kbenv.records import RecordWriter, make_record
    run_dir.mkdir(parents=True, exist_ok=True)
    if (run_dir / "records.msgpack").exists():
        (run_dir / "records.msgpack").unlink()
    with RecordWriter(run_dir) as writer:
        def on_result(index, row, result, source):
            writer.write(make_record(result.to_dict(), run_id=run_id, policy="known-bad", episode=index, turn=0,
                                     texts={"candidate": source, "name": row["candidate"]}))
        yield on_result


def cmd_redteam(args) -> int:
    """The known-bad suite against this deployment; exit 3 on any mismatch."""
    from tqdm import tqdm

    from kbenv.sandbox.actor import EvaluatorPool
    from kbenv.step import preflight
    from kbenv.suite import format_row, format_suite, run_suite, suite_problem_ids
    device = _device(args)
    size = _size(args, device)
    limits = _limits(args)
    if args.lanes > 1:
        from kbenv.sandbox import memplan
        memplan.set_gpu_lanes(args.lanes)  # sizes are planned with each lane's share of the GPU
    if size != "largest":  # "largest" picks a size that fits per problem
        preflight(suite_problem_ids(device, args.good), size, None, device)
    config = {"sandbox": args.sandbox}
    if limits:
        config["limits"] = limits
    pool = EvaluatorPool(n=args.evaluators or None, device=device, address=args.address or None, config=config,
                         lanes=args.lanes)
    try:
        bar = tqdm(desc="redteam", unit="candidate", disable=not args.progress)

        def on_row(row, done, total):
            bar.total = total
            bar.update(1)
            if not row["ok"]:
                bar.write("MISMATCH " + format_row(row))
            elif not args.progress:  # a log: every row as it arrives, so a run cut short keeps what finished
                print(f"[{done}/{total}] {format_row(row)}", flush=True)
        with _suite_records(Path(args.out) if args.out else None, "redteam") as on_result:
            report = run_suite(pool, size, include_good=args.good, on_row=on_row, only=args.only or None,
                               shard=args.shard, on_result=on_result)
        bar.close()
    finally:
        pool.close()
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        print(format_suite(report))
    return EXIT_MISMATCH if report["mismatches"] else EXIT_OK


def cmd_baselines(args) -> int:
    from tqdm import tqdm

    from kbenv import step
    from kbenv.problems import list_problems
    from kbenv.sandbox.baseline_figures import measure_alone
    from kbenv.sandbox.supervisor import Supervisor
    device = _device(args)
    ids = _parse_ids(args.ids)
    probs = [p for p in list_problems(args.set) if not ids or p.number in ids]
    if args.size == "largest":  # each problem at the largest size its memory plan admits, as a rollout picks it
        fits = {p.id: step.largest_size(p.id, args.precision, device) for p in probs}
        for pid in [pid for pid, z in fits.items() if z is None]:
            print(f"{pid}: no size fits this device's memory plan; skipped", file=sys.stderr)
        items = [(p, fits[p.id], args.precision or p.precision_default) for p in probs if fits[p.id]]
    else:
        size = _size(args, device)
        items = [(p, size, args.precision or p.precision_default) for p in probs]
    sup = Supervisor(device="cuda:0" if device == "cuda" else device, keep_spare=False)  # same cache and protocol
    try:
        for p, z, prec in tqdm(items, desc="baselines", unit="problem", disable=not args.progress):
            try:
                b = measure_alone(sup, p, z, prec)
            except step.MemoryPlanError as e:  # its evaluation's memory plan does not fit: nothing was allocated
                tqdm.write(f"{p.id}: skipped: {e}", file=sys.stderr)
                continue
            tqdm.write(f"{p.id:28s} {prec} eager {b['eager_ms']:.4f} ms  compile "
                       f"{b.get('compile_ms') or float('nan'):.4f} ms  best {b['best']}", file=sys.stdout)
    finally:
        sup.close()
    return 0


def cmd_rollout(args) -> int:
    from kbenv.records import read_metadata, read_records
    from kbenv.report import format_report, summarize
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
    recs = read_records(_run_dir(args.run))
    summ = summarize(recs)
    print(json.dumps(summ, indent=1, default=str) if args.json else format_report(summ))
    if args.plot:
        plot_speedups(recs, args.plot)
        print(f"plot: {args.plot}")
    return 0


def cmd_export(args) -> int:
    from kbenv.records import export_jsonl
    n = export_jsonl(_run_dir(args.run), args.out, verified_only=args.verified_only)
    what = "prompt/completion rows of verified turns" if args.verified_only else "records"
    print(f"{n} {what} -> {args.out}")
    return 0


def cmd_profile(args) -> int:
    from kbenv.rewards.profiler import profile_workload, save_profile
    device = _device(args)
    with _Ticker(f"profiling {args.workload} ({args.mode}, {device})", enabled=args.progress):
        prof = profile_workload(args.workload, args.mode, device=device, size=args.size)
    path = save_profile(prof, args.out or None)
    print(json.dumps({k: prof[k] for k in ("name", "buckets", "addressable_fraction", "unclassified_fraction")},
                     indent=1))
    print(f"profile: {path}")
    return 0


def cmd_project(args) -> int:
    from kbenv.project import project_run
    print(json.dumps(project_run(_run_dir(args.run), args.profile), indent=1))
    return 0


def cmd_demo(args) -> int:
    """The main job on an embedded default: known-good kernels and known exploits through the whole path."""
    from tqdm import tqdm

    from kbenv.records import read_records, write_metadata
    from kbenv.report import format_report, summarize
    from kbenv.rollout import RolloutConfig, run_rollout
    from kbenv.sandbox.actor import EvaluatorPool
    from kbenv.suite import format_row, format_suite, run_suite
    out = Path(args.out or "runs/demo")
    problems = [p.strip() for p in args.problems.split(",") if p.strip()] if args.problems else None
    for pid in problems or ():
        _problem(pid, "--problems")
    device = _device(args)
    size = _size(args, device)
    from kbenv.step import preflight
    from kbenv.suite import suite_problem_ids
    preflight(suite_problem_ids(device, True, problems), size, None, device)
    # Shorter phase limits than the defaults: the suite holds hangs and sleeps that run into them on purpose.
    limits = {"compile_s": 60, "trial_s": 20, "timing_s": 120}
    limits.update(_limits(args))
    pool = EvaluatorPool(device=device, config={"limits": limits})
    try:
        print(f"evaluators: {pool.info()}")
        run = out / "known-good"
        cfg = RolloutConfig(policy="known-good", problems=",".join(problems) if problems else "policy", turns=1,
                            device=device, out=str(run), resume=run.exists(), progress=args.progress)
        run_rollout(cfg, pool=pool)
        print(f"\n== known-good kernels: rollout {run} ==")
        print(format_report(summarize(read_records(run))))

        bad = out / "known-bad"
        bar = tqdm(desc="known-bad suite", unit="candidate", disable=not args.progress)
        with _suite_records(bad, "demo-known-bad") as on_result:
            def on_row(row, done, total):
                bar.total = total
                bar.update(1)
                if not row["ok"]:
                    bar.write("MISMATCH " + format_row(row))
            report = run_suite(pool, size, include_good=False, on_row=on_row, on_result=on_result,
                               problems=problems)
        bar.close()
        write_metadata(bad, {"suite": {k: v for k, v in report.items() if k != "rows"}, "finished": True})
        (bad / "suite.json").write_text(json.dumps(report, indent=1, default=str))
        print(f"\n== known-bad suite: every exploit and fault through the same path ({bad}) ==")
        print(format_suite(report))
    finally:
        pool.close()
    return 0


# -- parser -----------------------------------------------------------------------------------------------------

def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="print the traceback of a usage error too")


def _device_arg(p, default=None) -> None:
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default=default or "auto",
                   help="where candidates run: cuda (a GPU), cpu (Triton's interpreter), auto (cuda when visible)")


def _size_arg(p) -> None:
    p.add_argument("--size", choices=_sizes(), default="auto",
                   help="problem size tier (auto: full on cuda, small on the CPU)")


def _limit_arg(p) -> None:
    p.add_argument("--limit", action="append", default=[], metavar="PHASE=SECONDS",
                   help="a deadline for one sandbox phase, enforced from outside; repeatable; PHASE is compile, "
                        "trial or timing (default: the sandbox's own)")


def _sandbox_arg(p) -> None:
    p.add_argument("--sandbox", default="auto", choices=["auto", "bwrap", "none"],
                   help="candidate isolation: bwrap (bubblewrap), none (tests only), auto (bwrap when installed)")


def _progress_arg(p) -> None:
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                   help="show a progress bar on stderr")


def build_parser() -> argparse.ArgumentParser:
    from kbenv import __version__
    ap = _Parser(prog="kbenv", description="A non-gameable reward environment for GPU-kernel agents.",
                 epilog=EXIT_CODES)
    ap.add_argument("--version", action="version", version=f"kbenv {__version__}")
    ap.add_argument("--debug", action="store_true", default=False, help="print the traceback of a usage error too")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    def add(name, help, description, fn=None, epilog=None):
        p = sub.add_parser(name, help=help, description=description, epilog=epilog)
        _common(p)
        if fn is not None:
            p.set_defaults(fn=fn)
        return p

    p = add("problems", "list or show problems", "List the registered problems, or show one problem's source, "
            "shapes, op family, invariants and physical floor.", cmd_problems)
    psub = p.add_subparsers(dest="action", required=True, metavar="ACTION", help="list or show")
    pl = psub.add_parser("list", help="every problem id", description="Every problem id, its op family and name.")
    _common(pl)
    pl.add_argument("--set", choices=["kernelbench", "dlrm"], help="only this problem set (default: both)")
    pl.add_argument("--json", action="store_true", help="print JSON")
    pl.add_argument("--kernelbench-dir", help="also register problems from an external KernelBench checkout")
    ps = psub.add_parser("show", help="one problem", description="One problem's source, shapes, family, "
                         "invariants, domains, precision, small-size overrides and physical floor.")
    _common(ps)
    ps.add_argument("id", help="a problem id, e.g. kernelbench/level1/23")
    ps.add_argument("--json", action="store_true", help="print JSON (the source included)")
    ps.add_argument("--kernelbench-dir", help="also register problems from an external KernelBench checkout")

    a = add("audit", "does an all-zeros output pass KernelBench's allclose?",
            "For each problem, run the reference once and report max|y|, whether a tensor of zeros passes "
            "KernelBench's torch.allclose, by what margin, and whether zeros pass kbenv's own checks.", cmd_audit)
    a.add_argument("--set", choices=["kernelbench", "dlrm"], default="kernelbench", help="problem set")
    a.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="precision of the reference")
    _device_arg(a)
    _size_arg(a)
    a.add_argument("--ids", help="problem numbers, e.g. 1-60 or 19,23 (default: all)")
    a.add_argument("--json", action="store_true", help="print JSON")
    a.add_argument("--kernelbench-dir", help="also register problems from an external KernelBench checkout")

    e = add("eval", "evaluate one kernel file",
            "Evaluate one candidate through the sandbox and the verifier and print its verdict, every check "
            "with its figure, timings and reward. The exit status says whether kbenv worked, not whether the "
            "kernel did: read the verdict.", cmd_eval, epilog=EXIT_CODES)
    e.add_argument("--problem", required=True, help="problem id, e.g. kernelbench/level1/23 (required)")
    e.add_argument("--kernel", required=True,
                   help="a .py candidate, or a model's reply holding a ```python block (required)")
    _device_arg(e)
    _size_arg(e)
    e.add_argument("--precision", choices=["fp32", "bf16"], help="precision (default: the problem's own)")
    e.add_argument("--reward", default="amdahl", choices=["amdahl", "speedup", "fast_p"], help="reward function")
    e.add_argument("--profile", help="workload profile weighting the amdahl reward (default: the set's own)")
    _sandbox_arg(e)
    _limit_arg(e)
    e.add_argument("--no-time", action="store_true", help="correctness only: do not time the candidate")
    e.add_argument("--timing-budget", type=float, default=0.0, metavar="SECONDS",
                   help="seconds of paired timing, unless the ratio is settled sooner (default: 3 s on cuda); "
                        "less is faster and noisier")
    e.add_argument("--json", action="store_true", help="print the whole result as JSON")
    e.add_argument("--kernelbench-dir", help="also register problems from an external KernelBench checkout")

    rt = add("redteam", "run the known-bad suite against this deployment",
             "Replay every known exploit and fault (and the known-good kernels) through your deployment's "
             "device, sandbox and limits, and print the expected against the got verdict for each candidate. "
             "Exit 3 when any candidate's outcome differs from its expectation: your installation is gameable "
             "or broken in that place.", cmd_redteam, epilog=EXIT_CODES)
    _device_arg(rt)
    rt.add_argument("--size", choices=_sizes() + ("largest",), default="auto",
                    help="problem size tier (auto: full on cuda, small on the CPU; largest: per problem, the largest "
                         "size whose memory plan fits this device)")
    _sandbox_arg(rt)
    _limit_arg(rt)
    rt.add_argument("--only", action="append", default=[], metavar="TEXT",
                    help="only candidates whose id (problem:name) contains TEXT; repeatable (default: all)")
    rt.add_argument("--shard", type=_shard, default=None, metavar="K/N",
                    help="only every N-th candidate from the K-th (1-based): N runs split the suite evenly "
                         "(default: all)")
    rt.add_argument("--out", default=None, metavar="DIR",
                    help="keep every result whole (facts and phase splits) as records in DIR, for kbenv report and "
                         "kbenv export (default: none kept)")
    rt.add_argument("--good", action=argparse.BooleanOptionalAction, default=True,
                    help="also run the known-good kernels (a deployment that rejects everything is not safe, "
                         "it is broken)")
    rt.add_argument("--evaluators", type=int, default=0, help="evaluators to start (0 = one per GPU, or one CPU)")
    rt.add_argument("--lanes", type=int, default=1,
                    help="evaluators sharing each GPU (cuda; README \"Throughput\"): the suite as lanes judge it")
    rt.add_argument("--address", default="", help="Ray cluster address ('' = start a local cluster)")
    rt.add_argument("--json", action="store_true", help="print the suite report as JSON")
    _progress_arg(rt)

    b = add("baselines", "measure and cache eager/torch.compile baselines",
            "Measure the eager and torch.compile baselines of a problem set ahead of a run and cache them.",
            cmd_baselines)
    b.add_argument("action", choices=["build"], help="build: measure what is not cached yet")
    b.add_argument("--set", choices=["kernelbench", "dlrm"], help="problem set (default: both)")
    b.add_argument("--size", choices=_sizes() + ("largest",), default="auto",
                   help="problem size tier (auto: full on cuda, small on the CPU; largest: per problem, the largest "
                        "that fits, as `kbenv rollout --size largest` picks it)")
    b.add_argument("--precision", choices=["fp32", "bf16"], help="precision (default: each problem's own)")
    _device_arg(b)
    b.add_argument("--ids", help="problem numbers, e.g. 1-60 (default: all)")
    _progress_arg(b)

    from kbenv.rollout import RolloutConfig
    r = add("rollout", "Ray-parallel rollout of a policy",
            "Run a policy over problems for several turns, evaluations fanned out over one evaluator per GPU; "
            "every evaluation is appended to RUN/records.msgpack as it finishes (crash-safe; --resume "
            "continues).", cmd_rollout, epilog=EXIT_CODES)
    _add_config(r, RolloutConfig)

    rp = add("report", "summarise a run", "Table-1-style summary of a run's records: correct, verified, faster, "
             "speedups, failure categories, fast_p, per op family.", cmd_report)
    rp.add_argument("run", help="run directory (holds records.msgpack)")
    rp.add_argument("--plot", help="also write a PNG: speedups (log axis) and failures by category")
    rp.add_argument("--json", action="store_true", help="print the summary as JSON")

    ex = add("export", "export a run's records as JSONL",
             "Write a run's records as JSON lines, each with its texts (chat sent, reply, candidate source); "
             "with --verified-only, a prompt/completion set of the verified turns for supervised fine-tuning.",
             cmd_export)
    ex.add_argument("run", help="run directory (holds records.msgpack)")
    ex.add_argument("out", help="output .jsonl file (replaced atomically)")
    ex.add_argument("--verified-only", action="store_true",
                    help="only passing turns, as {prompt: [messages], completion: [assistant reply]} rows")

    pf = add("profile", "profile a workload's GPU time by kernel bucket and op family",
             "Profile a real workload (a DLRM, ResNet-50 or GPT step) and split its time by kernel bucket and op "
             "family: the addressable fraction that weights the amdahl reward.", cmd_profile)
    pf.add_argument("workload", choices=["dlrm", "resnet50", "gpt"], help="the workload to profile")
    pf.add_argument("--mode", choices=["train", "infer"], required=True, help="training or inference step (required)")
    _device_arg(pf)
    pf.add_argument("--size", default="full", choices=["full", "tiny"], help="workload size")
    pf.add_argument("--out", help="output JSON (default: the shipped profiles folder)")
    _progress_arg(pf)

    pj = add("project", "Eq. 1 projection of a run onto a workload profile",
             "The paper's Eq. 1 projection: what a run's verified kernels would save of a workload's wall clock.",
             cmd_project)
    pj.add_argument("run", help="run directory")
    pj.add_argument("--profile", required=True, help="workload profile name or path (required)")

    d = add("demo", "the main job: known-good kernels and known exploits, end to end",
            "Every known-good kernel (a rollout) and every known exploit and fault (the known-bad suite) through "
            "the whole path on an embedded default, then their reports. Both parts are saved under --out "
            "(known-good/ and known-bad/, each readable by kbenv report).", cmd_demo)
    _device_arg(d)
    _size_arg(d)
    d.add_argument("--out", default="runs/demo", help="output folder")
    d.add_argument("--problems", default="", help="comma-separated problem ids narrowing both parts (default: all)")
    _limit_arg(d)
    _progress_arg(d)
    return ap


def _one_line(e: BaseException) -> str:
    text = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
    return " ".join(str(text).split()) or type(e).__name__


def main(argv=None) -> int:
    _cpu_env()
    ap = build_parser()
    args = ap.parse_args(argv)
    debug = getattr(args, "debug", False)
    try:
        if getattr(args, "kernelbench_dir", None):
            from kbenv.problems import register_kernelbench_dir
            if not Path(args.kernelbench_dir).is_dir():
                raise UsageError(f"--kernelbench-dir {args.kernelbench_dir}", "no such directory")
            register_kernelbench_dir(args.kernelbench_dir)
        code = args.fn(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep the interpreter's own flush from failing again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_PIPE
    except KeyboardInterrupt:
        print("kbenv: interrupted", file=sys.stderr)
        return 130
    except USAGE_ERRORS as e:
        if debug:
            traceback.print_exc()
        print(f"kbenv {args.cmd}: error: {_one_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    except Exception:  # noqa: BLE001 - a harness fault: loud, with its traceback
        traceback.print_exc()
        print("kbenv: harness fault (a bug or failure of kbenv itself, not of the candidate); exit 1",
              file=sys.stderr)
        return EXIT_HARNESS


if __name__ == "__main__":
    sys.exit(main())

"""Ground truth for the timing path's slot-count question (issue 11: the lend share must not bias the speedup).

    python benchmarks/slot_bias.py [--problems kernelbench/level1/40,dlrm/2] [--size largest] [--blocks 1,4,16]
                                   [--repeats 15] [--out slot_bias.json]

In one trusted process, no sandbox and no executor: each problem's known-good kernel, its eager reference and the
reference under ``torch.compile``, each timed in blocks of n back-to-back calls on rotating input sets (the L2
evicted before every block, as the timing phase does), by CUDA events (the GPU's time) and by the host clock
around a synchronised block (what a supervisor's clock sees, less the executor path). Printed per side and n: the
median per-call time by each clock, and per n the ratio of the faster baseline to the kernel.

What it answers: a per-call time that falls with n by the GPU's clock is the GPU's own (cold-start) cost; one that
falls only by the host clock is a fixed cost per block, which the timing phase removes as the block intercept it
measures on a trusted baseline (``kbenv.sandbox.timing.BlockCalibration``). The events' ratio at the largest n is
the speedup the timing phase should report whatever its slot count.
"""

import argparse
import importlib.util
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch


def known_good(pid: str) -> str:
    from kbenv.agents.scripted import KnownGoodPolicy
    from kbenv.prompts import extract_code
    obs = {"problem_id": pid, "prompt": "", "system": "", "turn": 0, "feedback": ""}
    return extract_code(KnownGoodPolicy().act(obs))


def sides(pid: str, size: str, device: torch.device):
    """(models by side, a list of input sets) for one problem at one size, in its default precision."""
    from kbenv.problems import PRECISIONS, get_problem, make_inputs, make_model
    prob = get_problem(pid)
    ns = prob.namespace(size)
    dtype = PRECISIONS[prob.precision_default]
    # Triton's @jit reads its function's source from a file: the kernel is imported from one
    path = Path(tempfile.mkdtemp()) / f"known_good_{pid.replace('/', '_')}.py"
    path.write_text(known_good(pid))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ref = make_model(ns, "Model", 1, device, dtype).eval()
    cand = make_model(ns, "ModelNew", 1, device, dtype, cls=mod.ModelNew).eval()
    models = {"candidate": cand, "candidate_kept": cand, "eager": ref, "compile": torch.compile(ref)}
    first = make_inputs(ns, 100, "default", device, dtype)
    per_set = sum(x.numel() * x.element_size() for x in first if isinstance(x, torch.Tensor))
    sets = max(2, min(16, (8 << 30) // max(per_set, 1)))  # rotating sets, at most 8 GiB of them
    return models, [first] + [make_inputs(ns, 100 + k, "default", device, dtype) for k in range(1, sets)]


def time_side(model, inputs: list, n: int, repeats: int, flush: torch.Tensor, device,
              keep: bool = False) -> tuple[float, float]:
    """Median per-call ms of ``repeats`` blocks of ``n`` calls: (by CUDA events, by the host clock). ``keep``: each
    call's output kept alive until the same slot's next call, as a candidate's executor keeps it for the supervisor
    to read (a baseline's is dropped at once)."""
    ev, host = [], []
    kept: dict = {}
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.no_grad():
        for r in range(repeats + 1):
            flush.fill_(r)
            torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            start.record()
            for i in range(n):
                out = model(*inputs[(r * n + i) % len(inputs)])
                if keep:
                    kept[i] = out
                del out
            end.record()
            torch.cuda.synchronize(device)
            t1 = time.perf_counter()
            if r:  # the first block warms up
                ev.append(start.elapsed_time(end) / n)
                host.append(1e3 * (t1 - t0) / n)
    return statistics.median(ev), statistics.median(host)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", default="kernelbench/level1/40,dlrm/2")
    ap.add_argument("--size", default="largest")
    ap.add_argument("--blocks", default="1,4,16")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--out", default="slot_bias.json")
    args = ap.parse_args()
    device = torch.device("cuda")
    flush = torch.empty(64 << 20, dtype=torch.int32, device=device)  # 256 MiB, as the timing phase's eviction
    blocks = [int(b) for b in args.blocks.split(",")]
    report = {"device": torch.cuda.get_device_name(device), "problems": {}}
    for pid in args.problems.split(","):
        size = args.size
        if size == "largest":
            from kbenv.step import largest_size
            size = largest_size(pid, None, "cuda") or "small"
        models, inputs = sides(pid, size, device)
        rows = {}
        for name, model in models.items():
            with torch.no_grad():  # torch.compile compiles here, untimed
                model(*inputs[0])
            rows[name] = {n: time_side(model, inputs, n, args.repeats, flush, device, keep=name == "candidate_kept")
                          for n in blocks}
            for n in blocks:
                print(f"{pid} {size} {name:9s} n={n:3d}  events {rows[name][n][0]:.4f} ms/call  "
                      f"host {rows[name][n][1]:.4f} ms/call", flush=True)
        for n in blocks:
            best = min(rows["eager"][n][0], rows["compile"][n][0])
            best_host = min(rows["eager"][n][1], rows["compile"][n][1])
            print(f"{pid} n={n:3d}  speedup by events {best / rows['candidate'][n][0]:.3f}x "
                  f"(outputs kept {best / rows['candidate_kept'][n][0]:.3f}x)  "
                  f"by host clock {best_host / rows['candidate'][n][1]:.3f}x", flush=True)
        report["problems"][pid] = {"size": size, "input_sets": len(inputs),
                                   "ms_per_call": {name: {str(n): {"events": e, "host": h} for n, (e, h) in r.items()}
                                                   for name, r in rows.items()}}
        del models, inputs
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()

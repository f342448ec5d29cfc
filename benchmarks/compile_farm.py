"""GPU idle time spent waiting for CUDA compilation, with and without ahead-of-time builds (issue 13).

    python benchmarks/compile_farm.py [--n 8] [--size full] [--builders auto] [--runs 0,auto] [--out compile_farm.json]

A batch of ``--n`` honest CUDA candidates for problem 19 (a ``load_inline`` ReLU; each source differs, so no
build is shared) goes through one GPU evaluator twice: first with no builders (today's path: each executor runs
nvcc in its compile phase while the GPU waits), then with ``--builders`` sandboxed builders that the pool starts
on the whole batch before the first evaluation. Printed per run: wall time, the compile phases' sum (the GPU's
wait for compilation: nothing else runs on it then), how many candidates found their build ready, and verdicts.
``--runs`` picks which of the two runs to make (builder counts; ``0`` is today's sequential path), so that each
can have a device call of its own: eight sequential nvcc builds of about 50 s each fill most of one. ``auto`` is
the supervisor's default (``kbenv.sandbox.builds.default_workers``: a builder per four background cores).
Per candidate also ``build_wait_s``: of its compile phase, the wait for its build still running ahead (the rest is
the executor loading it, or compiling again); and ``decoy_wait_on_path_s``: the decoy's wait for its no-op
rewrite's build, where it outlasted correctness (each candidate needs two builds: its own and its decoy's). The
GPU's whole wait for compilation is the compile phases plus those (``gpu_wait_for_builds_s``).
"""

from __future__ import annotations

import argparse
import json
import time

CANDIDATE = r'''
import torch, torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
// variant VARIANT
__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    relu_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
_ext = load_inline(name="kbenv_relu_VARIANT", cpp_sources="torch::Tensor relu(torch::Tensor x);",
                   cuda_sources=_CUDA, functions=["relu"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.relu(x.contiguous())
'''


def decoy_build_wait(r) -> float:
    """The decoy's wait for its no-op rewrite's build still running ahead (``facts.decoy.split_s.build_wait``)."""
    return round(((r.facts.get("decoy") or {}).get("split_s") or {}).get("build_wait", 0.0), 2)


def decoy_on_path(r) -> float:
    """Of that wait, the part on the GPU's path: the decoy runs beside correctness, so only what outlasts
    correctness (the evaluation's ``decoy`` phase) holds the GPU back."""
    return round(min(decoy_build_wait(r), r.phase_seconds.get("decoy", 0.0)), 2)


def run(builders: int | None, n: int, size: str, tag: str) -> dict:
    from kbenv.sandbox.actor import EvaluatorPool
    from kbenv.sandbox.result import EvalRequest
    if size == "largest":  # the largest size whose memory plan fits this card (problem 19 full: 108 GiB)
        from kbenv.step import largest_size
        size = largest_size("kernelbench/level1/19", None, "cuda")
    reqs = [EvalRequest(problem="kernelbench/level1/19", candidate=CANDIDATE.replace("VARIANT", f"{tag}{k}"),
                        size=size) for k in range(n)]
    pool = EvaluatorPool(n=1, device="cuda", config={"builders": builders})
    try:
        t = time.perf_counter()
        got = []
        for i, r in pool.map(reqs):  # each as it finishes: a run cut by a call's limit keeps what it measured
            got.append((i, r))
            print(json.dumps({"builders": builders, "candidate": i, "at_s": round(time.perf_counter() - t, 2),
                              "compile_s": round(r.phase_seconds.get("compile", 0.0), 2),
                              "prebuilt": bool(r.facts.get("prebuilt")),
                              "build_wait_s": r.facts.get("build_wait_s"),
                              "decoy_build_wait_s": decoy_build_wait(r), "decoy_wait_on_path_s": decoy_on_path(r),
                              "verdict": r.verdict,
                              "category": r.category}), flush=True)
        results = [r for _, r in sorted(got, key=lambda x: x[0])]
        wall = time.perf_counter() - t
    finally:
        pool.close()
    compile_s = [r.phase_seconds.get("compile", 0.0) for r in results]
    builders = results[0].facts.get("builders", builders) if results else builders
    build_wait = sum(r.facts.get("build_wait_s") or 0.0 for r in results)
    decoy_wait = sum(decoy_on_path(r) for r in results)
    return {"builders": builders, "n": n, "wall_s": round(wall, 2), "compile_sum_s": round(sum(compile_s), 2),
            "build_wait_sum_s": round(build_wait, 2), "decoy_wait_on_path_sum_s": round(decoy_wait, 2),
            "gpu_wait_for_builds_s": round(sum(compile_s) + decoy_wait, 2),
            "compile_s": [round(c, 2) for c in compile_s],
            "prebuilt": sum(bool(r.facts.get("prebuilt")) for r in results),
            "verdicts": [r.verdict if r.verdict == "pass" else f"{r.verdict}:{r.category}" for r in results]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--size", default="full", help="a size tier, or largest (the largest that fits the card)")
    ap.add_argument("--builders", default="auto", help="builders of the farm's run: a count, or auto")
    ap.add_argument("--runs", default=None, help="builder counts to run, comma-separated (default: 0 and --builders)")
    ap.add_argument("--out", default="compile_farm.json")
    args = ap.parse_args()
    counts = args.runs.split(",") if args.runs else ["0", args.builders]
    runs = [None if b.strip() == "auto" else int(b) for b in counts]
    tag = f"{int(time.time()) % 100000}_"  # new sources every run: nothing is found in a cache of an earlier run
    rows = []
    for b in runs:
        row = run(b, args.n, args.size, f"{tag}b{b or 'auto'}_")
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(args.out, "w") as f:  # after each run: a kill at the call's limit keeps what finished
            json.dump(rows, f, indent=1)
    if len(rows) != 2 or rows[0]["builders"] != 0:
        return
    seq, farm = rows
    print(f"GPU waiting for compilation: {seq['gpu_wait_for_builds_s']} s sequential, "
          f"{farm['gpu_wait_for_builds_s']} s with "
          f"{farm['builders']} builders ({farm['prebuilt']}/{args.n} found their build ready); wall {seq['wall_s']} s "
          f"-> {farm['wall_s']} s", flush=True)


if __name__ == "__main__":
    main()

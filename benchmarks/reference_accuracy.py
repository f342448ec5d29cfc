"""How far the fp32 reference and a known-good kernel are from float64 truth, on each input domain.

    python benchmarks/reference_accuracy.py [--problems kernelbench/level1/40,...] [--size full] [--device cuda]

For each problem and each domain of its manifest: inputs drawn as the supervisor draws them, the reference run
in fp32 (as the verifier's reference is) and in float64 (truth), the problem's known-good kernel run in fp32, and
the relative Frobenius error of each against the truth. A known-good kernel that fails a structured domain while
the fp32 reference is close to the truth is a kernel bug; a fp32 reference far from the truth is a reference
that cannot judge that domain.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", default="kernelbench/level1/40")
    ap.add_argument("--size", default="full")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rows", type=int, default=0, help="keep only the first N rows of each input (0: all)")
    args = ap.parse_args()
    from kbenv.agents.scripted import KnownGoodPolicy
    from kbenv.problems import get_problem, make_inputs, make_model
    good = KnownGoodPolicy()
    for pid in args.problems.split(","):
        p = get_problem(pid)
        ns = p.namespace(args.size)
        path = next(iter(sorted((ROOT / "problems").glob(f"{p.set}/solutions/{p.number}/correct/*.py"))), None)
        spec = importlib.util.spec_from_file_location("candidate", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        ref32 = make_model(ns, "Model", 42, args.device, torch.float32)
        ref64 = make_model(ns, "Model", 42, args.device, torch.float64)
        cand = make_model(ns, "ModelNew", 42, args.device, torch.float32, cls=mod.ModelNew)
        for dom in p.domains:
            x = make_inputs(ns, 1234, dom, args.device, torch.float32, p.broad_inputs)
            if args.rows:
                x = [t[:args.rows].contiguous() if isinstance(t, torch.Tensor) and t.dim() else t for t in x]
            with torch.no_grad():
                truth = ref64(*[t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in x])
                r = ref32(*x)
                y = cand(*x)

            def rel(a):
                return float((a.double() - truth).norm() / truth.norm())
            print(f"{pid:24s} {dom:16s} fp32 reference vs float64 {rel(r):.3e}   known-good vs float64 {rel(y):.3e}"
                  f"   known-good vs fp32 reference {float((y.double() - r.double()).norm() / r.double().norm()):.3e}",
                  flush=True)
            del x, truth, r, y
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())

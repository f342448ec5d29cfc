"""How far apart are honest fp32 and a TF32 shortcut, per problem? (the precision contract, README "Precision")

For each problem at fp32, on its official inputs, against float64 truth:
  ref32   the fp32 reference (IEEE fp32: TF32 off), a stand-in for an honest fp32 kernel's error;
  tf32    the same model on operands rounded to TF32 (10-bit mantissa), which is what a TF32 or fp16 shortcut does
          to a product's operands (against the fp32 reference, as the supervisor measures it);
  hw      on cuda, the same model with PyTorch's TF32 switches on (the hardware's own TF32), against the fp32
          reference;
and whether the reference runs a tensor-core-eligible op (matmul, convolution), the only ones a shortcut speeds up.
The supervisor's bound (``rewards/precision.py``) must sit between the two on every eligible problem.

    python benchmarks/precision_margin.py [--size small] [--device cpu] [--ids 1-18,50-60]
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from kbenv.problems import list_problems, make_inputs, make_model
from kbenv.rewards import precision as P
from kbenv.sandbox.references import MODEL_SEED


def _ids(spec: str) -> set[int] | None:
    if not spec:
        return None
    out = set()
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def _rel(a: torch.Tensor, truth: torch.Tensor) -> float:
    t = truth.double()
    return float((a.double() - t).norm() / t.norm().clamp_min(1e-300))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="small")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--set", default="kernelbench")
    ap.add_argument("--ids", default="", help="problem numbers, e.g. 1-18,50 (default: all)")
    ap.add_argument("--eligible-only", action="store_true")
    args = ap.parse_args(argv)
    P.ieee_fp32()
    wanted = _ids(args.ids)
    print(f"{'problem':34s} {'eligible':>8s} {'ref32':>10s} {'tf32':>10s} {'hw':>10s} {'tf32/ref32':>10s} "
          f"{'bound':>10s}  s")
    for prob in list_problems(args.set):
        if wanted is not None and prob.number not in wanted:
            continue
        if "fp32" not in prob.precision_allowed:
            continue
        t0 = time.perf_counter()
        try:
            ns = prob.namespace(args.size)
            model = make_model(ns, "Model", MODEL_SEED, args.device, torch.float32)
            inputs = make_inputs(ns, 1234, "default", args.device, torch.float32, prob.broad_inputs)
            with torch.no_grad():
                out32 = model(*inputs)
                outs32 = [out32] if isinstance(out32, torch.Tensor) else list(out32)
                eligible, shortcut = P.rounded_errors(model, inputs, outs32)
                if args.eligible_only and not eligible:
                    continue
                hw = [None] * len(outs32)
                if eligible and args.device.startswith("cuda"):
                    hw = P.hardware_errors(model, inputs, outs32)
                m64 = make_model(ns, "Model", MODEL_SEED, args.device, torch.float64)
                out64 = m64(*[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                              for x in inputs])
        except Exception as e:  # noqa: BLE001 (a benchmark: report and go on)
            print(f"{prob.id:34s} error: {e!r}"[:160])
            continue
        outs64 = [out64] if isinstance(out64, torch.Tensor) else list(out64)
        worst = [max((e for e in pair if e is not None), default=None) for pair in zip(shortcut, hw)]
        bound = P.downgrade_bound(worst, eligible, 1e-4)  # as the supervisor's (shortcut_errors)
        for k, (o32, o64) in enumerate(zip(outs32, outs64)):
            if not o32.is_floating_point():
                continue
            r32 = _rel(o32, o64)
            tf = shortcut[k] if shortcut[k] is not None else float("nan")
            h = hw[k] if hw[k] is not None else float("nan")
            print(f"{prob.id + ('' if k == 0 else f'[{k}]'):34s} {str(eligible):>8s} {r32:10.2e} {tf:10.2e} {h:10.2e} "
                  f"{tf / r32 if r32 else float('nan'):10.1f} {bound:10.2e}  {time.perf_counter() - t0:.1f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``kbenv audit``: is a problem's correctness check informative? (the paper's §5 and Table 2)

For each problem the reference runs once; the audit reports max|y|, whether an all-zeros output passes
KernelBench's ``torch.allclose(y, 0, atol=rtol=tol)`` (tol 1e-4 at fp32, 1e-2 at bf16), the margin
max|y| / atol by which zeros fail it (< 1 means zeros pass), and whether zeros pass kbenv's own
scale-invariant error checks (they never should).
"""

from __future__ import annotations

import torch

from kbenv.problems import PRECISIONS, list_problems, make_inputs, make_model, problem_seed
from kbenv.rewards.checks import error_figures, tolerances
from kbenv.step import resolve_device, resolve_size

KB_TOL = {"fp32": 1e-4, "bf16": 1e-2, "fp16": 1e-2}


def audit(set_name: str = "kernelbench", precision: str = "fp32", device: str | None = None,
          size: str | None = None, ids: set[int] | None = None) -> list[dict]:
    device = resolve_device(device or "auto")
    size = resolve_size(size, device)
    dtype = PRECISIONS[precision]
    tol = KB_TOL[precision]
    rows = []
    for p in list_problems(set_name):
        if ids and p.number not in ids:
            continue
        ns = p.namespace(size)
        model = make_model(ns, "Model", 42, device, dtype)
        inputs = make_inputs(ns, problem_seed(p.id), "default", device, dtype, p.broad_inputs)
        with torch.no_grad():
            out = model(*inputs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        max_abs = max(float(o.detach().double().abs().max()) for o in outs if o.numel())
        zeros_pass = all(bool(torch.allclose(o, torch.zeros_like(o), atol=tol, rtol=tol)) for o in outs)
        fig = error_figures(outs[0], torch.zeros_like(outs[0]))
        ours = tolerances(precision)
        rows.append({"id": p.id, "name": p.name, "max_abs": max_abs, "zeros_pass_allclose": zeros_pass,
                     "margin": max_abs / tol, "zeros_pass_kbenv": fig["rel_frobenius"] < ours["rel_frobenius"]
                     and fig["max_rel"] < ours["max_rel"]})
        del model, inputs, out, outs
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def format_audit(rows: list[dict], precision: str) -> str:
    lines = [f"{'problem':28s} {'max|y|':>10s} {'zeros pass allclose':>20s} {'margin':>10s} {'zeros pass kbenv':>17s}"]
    for r in rows:
        lines.append(f"{r['id']:28s} {r['max_abs']:10.3g} {str(r['zeros_pass_allclose']):>20s} "
                     f"{r['margin']:9.3g}x {str(r['zeros_pass_kbenv']):>17s}")
    gameable = [r["id"].rsplit("/", 1)[1] for r in rows if r["zeros_pass_allclose"]]
    lines.append(f"\n{len(gameable)} of {len(rows)} gameable by zeros at {precision} (atol=rtol={KB_TOL[precision]}): "
                 f"{', '.join(gameable) or 'none'}")
    ok = [r for r in rows if not r["zeros_pass_allclose"]]
    if ok:
        m = min(ok, key=lambda r: r["margin"])
        lines.append(f"minimum margin among the rest: {m['margin']:.3g}x ({m['id']})")
    lines.append(f"zeros pass kbenv's checks on {sum(r['zeros_pass_kbenv'] for r in rows)} of {len(rows)}")
    return "\n".join(lines)

"""Merge the hand-written manifest parts of a set and compute each problem's physical floor.

    python -m kbenv.problems.build_manifest [--set kernelbench|dlrm] [--check]

The floor is what no kernel can beat at full size: every input, parameter and output moved through device
memory once (``float_elements`` scale with the precision, ``other_bytes`` do not) and the FLOPs that
``torch.utils.flop_counter`` counts for the reference (matmuls, convolutions, attention). It is computed on
the meta device, so no full-size tensor is ever allocated. ``--check`` fails if the committed manifest differs
from a fresh build (a test runs it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from kbenv.problems import SETS, load_namespace


def _tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _tensors(y)


def compute_floor(source: str, filename: str, exclude: dict | None = None) -> dict:
    """Minimum traffic and FLOPs at full size. ``exclude`` (the manifest's ``floor_exclude``) names inputs
    (``"inputs": [i, ...]``) or all parameters (``"params": true``) that the op reads only sparsely (embedding
    tables): they count for nothing, so the floor stays a true lower bound."""
    exclude = exclude or {}
    ns = load_namespace(source, filename)
    with torch.device("meta"):
        torch.manual_seed(0)
        inputs = ns["get_inputs"]()
        model = ns["Model"](*ns["get_init_inputs"]())
    skip = set(exclude.get("inputs", []))
    tensors = [t for i, x in enumerate(inputs) if i not in skip for t in _tensors(x)]
    if not exclude.get("params"):
        tensors += list(model.parameters()) + list(model.buffers())
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        out = model(*inputs)
    tensors += list(_tensors(out))
    float_elements = sum(t.numel() for t in tensors if t.is_floating_point())
    other_bytes = sum(t.numel() * t.element_size() for t in tensors if not t.is_floating_point())
    return {"float_elements": int(float_elements), "other_bytes": int(other_bytes),
            "flops": int(fc.get_total_flops())}


def build(set_name: str) -> dict:
    set_dir = SETS[set_name]
    entries = []
    parts = sorted(set_dir.glob("_parts/*.json")) + sorted(set_dir.glob("_part.json"))
    for part in parts:
        entries.extend(json.loads(part.read_text()))
    if not entries:
        raise SystemExit(f"{set_dir}: no manifest parts (_parts/*.json or _part.json)")
    entries.sort(key=lambda e: int(e["id"].rsplit("/", 1)[1]))
    for e in entries:
        f = set_dir / e["file"]
        try:
            e["floor"] = compute_floor(f.read_text(), str(f), e.get("floor_exclude"))
        except Exception as exc:  # noqa: BLE001 - reported, and the build fails below
            raise SystemExit(f"{f}: floor could not be computed on the meta device: {exc!r}")
    return {"set": set_name, "version": 0, "problems": entries}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=sorted(SETS), action="append")
    ap.add_argument("--check", action="store_true", help="fail if the committed manifest is stale")
    args = ap.parse_args(argv)
    status = 0
    for name in args.set or sorted(SETS):
        fresh = build(name)
        path = SETS[name] / "manifest.json"
        text = json.dumps(fresh, indent=1) + "\n"
        if args.check:
            if not path.exists() or path.read_text() != text:
                print(f"{path} is stale: run python -m kbenv.problems.build_manifest --set {name}")
                status = 1
        else:
            path.write_text(text)
            print(f"wrote {path} ({len(fresh['problems'])} problems)")
    return status


if __name__ == "__main__":
    sys.exit(main())

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
import dataclasses
import json
import sys
import weakref
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from kbenv.problems import SETS, cast_value, load_namespace


def _tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _tensors(y)


class _LiveBytes(TorchDispatchMode):
    """Tracks the bytes of tensors that ops allocate and that are still alive, and their peak.

    Views and in-place results (a return with alias information) allocate nothing and are not counted. A
    tensor is counted until its last reference (Python or C++) is gone."""

    def __init__(self):
        super().__init__()
        self.live = 0
        self.peak = 0

    def _free(self, nbytes: int) -> None:
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not any(r.alias_info is not None for r in func._schema.returns):
            for t in _tensors(out):
                n = t.numel() * t.element_size()
                self.live += n
                weakref.finalize(t, self._free, n)
            self.peak = max(self.peak, self.live)
        return out


@dataclasses.dataclass(frozen=True)
class MetaRun:
    """One forward of a problem's reference on the meta device (no memory allocated).

    Attributes:
        inputs: ``get_inputs()`` (floating-point tensors cast to the run's dtype, others as drawn).
        model: the reference ``Model`` (floating-point parameters and buffers cast to the run's dtype).
        outputs: the forward's output tensors, flattened.
        flops: what ``torch.utils.flop_counter`` counts for the forward.
        forward_peak_bytes: the most bytes the forward's own allocations held at once (its outputs included).
    """

    inputs: list
    model: torch.nn.Module
    outputs: list
    flops: int
    forward_peak_bytes: int


def run_on_meta(ns: dict, dtype: torch.dtype | None = None) -> MetaRun:
    """Build a problem's inputs and reference on the meta device and run its forward once.

    ``ns`` is a namespace from :func:`kbenv.problems.load_namespace` (with any size overrides applied);
    ``dtype`` casts floating-point inputs, parameters and buffers as an evaluation at that precision does
    (None: as the file makes them). Used for the floor here and for the memory plan (``sandbox/memplan.py``).
    """
    with torch.device("meta"):
        torch.manual_seed(0)
        inputs = ns["get_inputs"]()
        model = ns["Model"](*ns["get_init_inputs"]())
    if dtype is not None:
        inputs = [cast_value(x, "meta", dtype) for x in inputs]
        model = model.to(dtype=dtype)
    live = _LiveBytes()
    with FlopCounterMode(display=False) as fc, torch.no_grad(), live:
        out = model(*inputs)
    return MetaRun(list(inputs), model, list(_tensors(out)), int(fc.get_total_flops()), int(live.peak))


def compute_floor(source: str, filename: str, exclude: dict | None = None) -> dict:
    """Minimum traffic and FLOPs at full size. ``exclude`` (the manifest's ``floor_exclude``) names inputs
    (``"inputs": [i, ...]``) or all parameters (``"params": true``) that the op reads only sparsely (embedding
    tables): they count for nothing, so the floor stays a true lower bound."""
    exclude = exclude or {}
    run = run_on_meta(load_namespace(source, filename))
    model, inputs = run.model, run.inputs
    skip = set(exclude.get("inputs", []))
    tensors = [t for i, x in enumerate(inputs) if i not in skip for t in _tensors(x)]
    if not exclude.get("params"):
        tensors += list(model.parameters()) + list(model.buffers())
    tensors += run.outputs
    float_elements = sum(t.numel() for t in tensors if t.is_floating_point())
    other_bytes = sum(t.numel() * t.element_size() for t in tensors if not t.is_floating_point())
    return {"float_elements": int(float_elements), "other_bytes": int(other_bytes), "flops": run.flops}


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

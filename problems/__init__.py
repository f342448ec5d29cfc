"""Problem sets in KernelBench format and their manifests.

A problem is a Python source file defining ``Model`` (the reference), ``get_inputs()`` and
``get_init_inputs()`` plus module-level size constants, and a manifest entry (``MANIFEST.md``) with its op
family, invariants, input domains, precision policy, CPU size and physical floor.

Public API:

- :func:`list_problems` / :func:`get_problem`: the registry of shipped problems (``kernelbench/level1/<n>``,
  ``dlrm/<n>``) and of external KernelBench checkouts registered with :func:`register_kernelbench_dir`.
- :class:`Problem`: one problem; :meth:`Problem.namespace` executes its source with the size overrides,
  :meth:`Problem.make_inputs` draws inputs for a seed and domain, :meth:`Problem.make_model` builds the
  reference under a seed.

Problem ids never change meaning: a change to shapes, init, tolerance or invariants bumps the set's
``version`` and the old ids fail with a message naming the new ones.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent
SETS = {"kernelbench": ROOT / "kernelbench", "dlrm": ROOT / "dlrm"}

FAMILIES = (
    "matmul", "conv", "elementwise", "softmax", "normalization", "pooling", "reduction", "scan", "loss",
    "attention", "embedding", "gather_scatter", "topk", "interaction",
)
DOMAINS = ("default", "normal", "signed_uniform", "wide")
PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class ProblemError(ValueError):
    """A problem file or manifest entry is malformed; the message names the file and what is missing."""


@dataclasses.dataclass(frozen=True)
class Problem:
    """One problem: its source, manifest entry and how to build its inputs and reference.

    Attributes:
        id: stable id, e.g. ``kernelbench/level1/23``.
        name: file stem, e.g. ``23_Softmax``.
        path: absolute path of the problem file.
        family: op family (``FAMILIES``).
        invariants: invariant specs ``{"kind": ..., **params}`` checked on candidate outputs.
        domains: input distributions the op is defined on; the first is the official one.
        broad_inputs: positional inputs a non-default domain redraws (None = every float input).
        precision_default: ``fp32`` or ``bf16``.
        precision_allowed: precisions the problem may run at.
        small: module-constant overrides for the CPU size.
        tolerance: optional per-problem threshold overrides.
        floor: ``{"float_elements", "other_bytes", "flops"}`` at full size.
    """

    id: str
    name: str
    path: Path
    family: str
    invariants: tuple = ()
    domains: tuple = ("default",)
    broad_inputs: tuple | None = None
    precision_default: str = "fp32"
    precision_allowed: tuple = ("fp32", "bf16")
    small: dict = dataclasses.field(default_factory=dict)
    tolerance: dict = dataclasses.field(default_factory=dict)
    floor: dict = dataclasses.field(default_factory=dict)

    @property
    def set(self) -> str:
        return self.id.split("/", 1)[0]

    @property
    def number(self) -> int:
        return int(self.id.rsplit("/", 1)[1])

    @property
    def source(self) -> str:
        return self.path.read_text()

    @property
    def source_sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    def overrides(self, size: str) -> dict:
        if size == "full":
            return {}
        if size == "small":
            return dict(self.small)
        raise ValueError(f"size must be 'small' or 'full', got {size!r}")

    def namespace(self, size: str = "full") -> dict:
        """Execute the problem source and apply the size's constant overrides."""
        return load_namespace(self.source, str(self.path), self.overrides(size))

    def floor_bytes(self, precision: str) -> int:
        esize = torch.tensor([], dtype=PRECISIONS[precision]).element_size()
        return int(self.floor.get("float_elements", 0) * esize + self.floor.get("other_bytes", 0))

    def floor_ms(self, precision: str, peak_bytes_per_s: float, peak_flops: float) -> float:
        """The physical floor: max(minimum bytes / bandwidth, FLOPs / peak rate), in ms."""
        t_bytes = self.floor_bytes(precision) / peak_bytes_per_s
        t_flops = self.floor.get("flops", 0) / peak_flops
        return 1e3 * max(t_bytes, t_flops)

    def describe(self) -> dict:
        """A fresh JSON-safe dict (a copy: callers may keep or modify it)."""
        return copy.deepcopy(self._describe())

    def _describe(self) -> dict:
        d = {
            "id": self.id, "name": self.name, "family": self.family, "invariants": list(self.invariants),
            "domains": list(self.domains), "precision": {"default": self.precision_default,
                                                         "allowed": list(self.precision_allowed)},
            "small": self.small, "floor": self.floor, "file": str(self.path),
        }
        if self.broad_inputs is not None:
            d["broad_inputs"] = list(self.broad_inputs)
        if self.tolerance:
            d["tolerance"] = self.tolerance
        return d


def load_namespace(source: str, filename: str, overrides: dict | None = None) -> dict:
    """Execute a KernelBench-format source and check it defines what a problem needs."""
    ns: dict[str, Any] = {"__name__": f"kbenv_problem_{abs(hash(filename))}", "__file__": filename}
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as e:
        raise ProblemError(f"{filename}: syntax error: {e}") from e
    exec(code, ns)  # noqa: S102 - problem files are trusted, shipped or named by the user
    missing = [k for k in ("Model", "get_inputs", "get_init_inputs") if k not in ns]
    if missing:
        raise ProblemError(f"{filename}: missing {', '.join(missing)} (a KernelBench problem defines Model, "
                           f"get_inputs and get_init_inputs)")
    if not (isinstance(ns["Model"], type) and issubclass(ns["Model"], torch.nn.Module)):
        raise ProblemError(f"{filename}: Model is not an nn.Module subclass")
    for k, v in (overrides or {}).items():
        if k not in ns:
            raise ProblemError(f"{filename}: size override {k!r} is not a module-level constant")
        ns[k] = v
    return ns


def cast_value(x: Any, device: torch.device | str, dtype: torch.dtype) -> Any:
    """Move a tensor input to the device; cast floating-point ones to the precision's dtype.

    Unlike KernelBench, integer and boolean tensors keep their dtype (KernelBench casts every tensor, which
    breaks int64 class targets); masks stay masks.
    """
    if isinstance(x, torch.Tensor):
        x = x.to(device)
        return x.to(dtype) if x.is_floating_point() else x
    return x


def redraw(x: torch.Tensor, domain: str, gen: torch.Generator) -> torch.Tensor:
    """Redraw a floating-point tensor from a broader domain with the same shape, dtype and device."""
    if domain == "normal":
        return torch.randn(x.shape, generator=gen, device=x.device, dtype=torch.float32).to(x.dtype)
    if domain == "signed_uniform":
        return (torch.rand(x.shape, generator=gen, device=x.device, dtype=torch.float32) * 2 - 1).to(x.dtype)
    if domain == "wide":
        return (torch.randn(x.shape, generator=gen, device=x.device, dtype=torch.float32) * 100).to(x.dtype)
    raise ValueError(f"unknown domain {domain!r}")


def make_inputs(ns: dict, seed: int, domain: str, device, dtype: torch.dtype, broad_inputs=None) -> list:
    """Draw one input set: ``get_inputs()`` under ``seed`` on ``device``, then the domain's redraw.

    Inputs are drawn directly on the device (``torch.device`` context), so the same seed gives the same
    values wherever this runs on the same device type and torch build; the trusted side and the candidate's
    worker both call this with the same arguments.
    """
    dev = torch.device(device)
    with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
        torch.manual_seed(seed)
        with dev:
            raw = ns["get_inputs"]()
        inputs = [cast_value(x, dev, dtype) for x in raw]
        if domain != "default":
            gen = torch.Generator(device=dev)
            gen.manual_seed(seed ^ 0x5DEECE66D)
            for i, x in enumerate(inputs):
                if isinstance(x, torch.Tensor) and x.is_floating_point() and (
                        broad_inputs is None or i in broad_inputs):
                    inputs[i] = redraw(x, domain, gen)
    return inputs


def make_model(ns: dict, cls_name: str, seed: int, device, dtype: torch.dtype, cls=None) -> torch.nn.Module:
    """Build ``Model`` (or the candidate's class) under ``seed`` so both get the same random weights."""
    dev = torch.device(device)
    init = [cast_value(x, "cpu", torch.float32) if isinstance(x, torch.Tensor) else x
            for x in ns["get_init_inputs"]()]
    with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
        torch.manual_seed(seed)
        model = (cls or ns[cls_name])(*init)
    # nn.Module.to(dtype=...) casts floating-point parameters and buffers only (as KernelBench does).
    return model.to(device=dev, dtype=dtype)


# --------------------------------------------------------------------------------------------- registry

_EXTERNAL: dict[str, Problem] = {}


def _entry_to_problem(entry: dict, set_dir: Path) -> Problem:
    where = f"{set_dir / 'manifest.json'} entry {entry.get('id', '?')}"
    for k in ("id", "name", "file", "family"):
        if k not in entry:
            raise ProblemError(f"{where}: missing {k!r}")
    if entry["family"] not in FAMILIES:
        raise ProblemError(f"{where}: family {entry['family']!r} not in {FAMILIES}")
    for d in entry.get("domains", ["default"]):
        if d not in DOMAINS:
            raise ProblemError(f"{where}: domain {d!r} not in {DOMAINS}")
    prec = entry.get("precision", {})
    return Problem(
        id=entry["id"], name=entry["name"], path=set_dir / entry["file"], family=entry["family"],
        invariants=tuple(entry.get("invariants", ())), domains=tuple(entry.get("domains", ["default"])),
        broad_inputs=tuple(entry["broad_inputs"]) if entry.get("broad_inputs") is not None else None,
        precision_default=prec.get("default", "fp32"), precision_allowed=tuple(prec.get("allowed", ["fp32", "bf16"])),
        small=dict(entry.get("small", {})), tolerance=dict(entry.get("tolerance", {})),
        floor=dict(entry.get("floor", {})),
    )


@lru_cache(maxsize=None)
def _load_set(name: str) -> dict[str, Problem]:
    set_dir = SETS[name]
    manifest = set_dir / "manifest.json"
    if not manifest.exists():
        raise ProblemError(f"{manifest}: manifest missing")
    data = json.loads(manifest.read_text())
    out = {}
    for entry in data["problems"]:
        p = _entry_to_problem(entry, set_dir)
        if not p.path.exists():
            raise ProblemError(f"{manifest}: {p.id} names {p.path}, which does not exist")
        out[p.id] = p
    return out


def list_problems(set: str | None = None) -> list[Problem]:
    """Every registered problem, in id order (sets: ``kernelbench``, ``dlrm``, external ones)."""
    names = [set] if set else list(SETS)
    probs: list[Problem] = []
    for n in names:
        if n in SETS:
            probs.extend(_load_set(n).values())
    probs.extend(p for p in _EXTERNAL.values() if set is None or p.set == set)
    return sorted(probs, key=lambda p: (p.set, _id_key(p.id)))


def _id_key(pid: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", pid)]


def get_problem(problem_id: str) -> Problem:
    """Look a problem up by id (``kernelbench/level1/23``, ``dlrm/1``, or ``kernelbench-ext/level2/5``)."""
    if problem_id in _EXTERNAL:
        return _EXTERNAL[problem_id]
    set_name = problem_id.split("/", 1)[0]
    if set_name in SETS:
        probs = _load_set(set_name)
        if problem_id in probs:
            return probs[problem_id]
    raise KeyError(f"unknown problem {problem_id!r}; `kbenv problems list` shows the ids")


_KB_FILE = re.compile(r"^(\d+)_.*\.py$")


def register_kernelbench_dir(path: str | os.PathLike, levels=(1, 2, 3)) -> list[Problem]:
    """Register problems from an external KernelBench checkout, files unchanged.

    ``path`` is the checkout root (holding ``KernelBench/level1``) or its ``KernelBench`` folder. Problems get
    ids ``kernelbench-ext/level<L>/<n>``, family from a name heuristic, no invariants, the default domain,
    and no small size (they run at full size). Each file is executed once to check it defines
    ``Model``/``get_inputs``/``get_init_inputs``; a malformed file raises :class:`ProblemError` naming it.
    """
    root = Path(path)
    if (root / "KernelBench").is_dir():
        root = root / "KernelBench"
    found = []
    for level in levels:
        d = root / f"level{level}"
        if not d.is_dir():
            continue
        for f in sorted(d.iterdir()):
            m = _KB_FILE.match(f.name)
            if not m:
                continue
            load_namespace(f.read_text(), str(f))
            p = Problem(id=f"kernelbench-ext/level{level}/{int(m.group(1))}", name=f.stem, path=f,
                        family=guess_family(f.stem))
            _EXTERNAL[p.id] = p
            found.append(p)
    if not found:
        raise ProblemError(f"{path}: no KernelBench level folders with problem files found")
    return found


def guess_family(name: str) -> str:
    n = name.lower()
    rules = [("softmax", "softmax"), ("attention", "attention"), ("conv", "conv"), ("matmul", "matmul"),
             ("gemm", "matmul"), ("matrix", "matmul"), ("norm", "normalization"), ("pool", "pooling"),
             ("loss", "loss"), ("cum", "scan"), ("reduction", "reduction"), ("argm", "reduction"),
             ("embedding", "embedding")]
    for key, fam in rules:
        if key in n:
            return fam
    return "elementwise"


def problem_seed(problem_id: str, salt: str = "") -> int:
    """A deterministic 63-bit seed for public uses (audits, registry tests); the sandbox mixes in a secret."""
    h = hashlib.sha256(f"{problem_id}|{salt}".encode()).digest()
    return int.from_bytes(h[:8], "big") & ((1 << 63) - 1)


__all__ = [
    "Problem", "ProblemError", "FAMILIES", "DOMAINS", "PRECISIONS", "list_problems", "get_problem",
    "register_kernelbench_dir", "load_namespace", "make_inputs", "make_model", "cast_value", "problem_seed",
]

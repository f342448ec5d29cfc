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
import math
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
DOMAINS = ("default", "normal", "signed_uniform", "wide", "structured", "offset", "log_structured", "simplex",
           "sparse", "signs")
# Domains that keep the problem's own draw and give it structure drawn from the seed (so every part of the input
# matters and a candidate cannot learn where the mass sits); the others redraw i.i.d. values.
STRUCTURED_DOMAINS = ("structured", "offset", "log_structured", "simplex", "sparse")
# ``signs``: the problem's own draw with a random sign per element (symmetric where the draw is square: a symmetric
# or triangular matrix stays one), so a zero-mean domain for problems whose inputs have a structure no i.i.d.
# redraw keeps (13-15); the timed domain of those (``rewards.precision.timed_domain``)
KEPT_DRAW_DOMAINS = STRUCTURED_DOMAINS + ("signs",)
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
        medium: module-constant overrides for the 24 GB GPU tier (``{}``: the full size already fits).
        tolerance: optional per-problem threshold overrides.
        reduced: the reduced axes, groups ``((inputs, dim), ...)``: each group names positional inputs that are
            reduced together along ``dim`` (a softmax's row, a loss's batch, a bag's members); the generated
            attack drops part of each group (MANIFEST.md).
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
    medium: dict = dataclasses.field(default_factory=dict)
    tolerance: dict = dataclasses.field(default_factory=dict)
    floor: dict = dataclasses.field(default_factory=dict)
    reduced: tuple = ()

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
        """The module constants a size replaces: ``small`` (CPU runs), ``medium`` (sized so a whole evaluation
        fits a 24 GB GPU; ``sandbox/memplan.py`` plans it) or ``full`` (none)."""
        if size == "full":
            return {}
        if size == "small":
            return dict(self.small)
        if size == "medium":
            return dict(self.medium)
        raise ValueError(f"size must be 'small', 'medium' or 'full', got {size!r}")

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
            "small": self.small, "medium": self.medium, "floor": self.floor, "file": str(self.path),
        }
        if self.broad_inputs is not None:
            d["broad_inputs"] = list(self.broad_inputs)
        if self.tolerance:
            d["tolerance"] = self.tolerance
        if self.reduced:
            d["reduced"] = [{"inputs": list(ins), "dim": dim} for ins, dim in self.reduced]
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
    return redraw_as(x.shape, x.dtype, x.device, domain, gen)


def redraw_as(shape, dtype: torch.dtype, device, domain: str, gen: torch.Generator) -> torch.Tensor:
    """A broader domain's draw of a tensor of this shape, dtype and device, made in place: at full size an input
    is gigabytes, and ``rand * 2 - 1`` beside the draw it replaced held four of them at once (problem 47's 8 GiB
    input on an H100: the supervisor ran out of memory at 32 GiB held and an honest candidate was blamed, stop
    42). The values are those of the out-of-place arithmetic."""
    if domain == "normal":
        return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)
    if domain == "signed_uniform":
        return torch.rand(shape, generator=gen, device=device, dtype=torch.float32).mul_(2).sub_(1).to(dtype)
    if domain == "wide":
        return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).mul_(100).to(dtype)
    raise ValueError(f"unknown domain {domain!r}")


# Structured domains. Constants are part of the domains' meaning: changing one changes every problem that lists
# the domain (bump the set's version).
_BULK_DECADES = 1.0  # every index along every axis is scaled by 10**U(0, 1)
_HEAVY_PER_AXIS = 16  # indices per axis (at most one in 8) that together carry most of the mass
_HEAVY_MASS = 1.0  # their mass, in units of the mass of all the other indices of the axis
_HEAVY_RANGE = 9.0  # the heavy factors of all axes together stay below 10**9
_SPIKES_PER_FIBER = 8  # spikes per fiber of the longest axis (at most one element in 8)
_SPIKE_LIMIT = 1e12  # no element grows beyond this times the largest |x| of the problem's draw
_SPARSE_CARRIERS = 32  # the sparse domain: elements per tensor that carry most of its mass
_OFFSET_DECADES = 1.5  # per-row offsets of 10**U(0, 1.5) times the row's mean |x|, random sign


def structure(x: torch.Tensor, gen: torch.Generator, offsets: bool = False, log: bool = False) -> torch.Tensor:
    """Give a floating-point tensor (the problem's own draw, modified in place) structure drawn from ``gen``.

    - every axis of length >= 2: each index scaled by 10**U(0, 1) (rows and columns over a decade), and
      ``_HEAVY_PER_AXIS`` indices per axis by about (axis length x the mean bulk factor) x 10**U(-0.5, 0.5), so
      a few rows, columns or bags carry about as much mass as all the others together at any size;
    - sparse spikes, ``_SPIKES_PER_FIBER`` per fiber of the longest axis (at most one element in 8), each about as
      large as the bulk of its fiber, so reading a fiber in part misses or double-counts some;
    - with ``offsets`` (the ``offset`` domain), each row (index of axis 0, for tensors of rank >= 2) is shifted by
      a random-sign offset of 10**U(0, 1.5) times the row's mean |x|.

    Factors are positive, so signs are kept and an input that must be positive stays positive. Magnitudes stay
    below 10**12 times the draw's largest |x| (sums of squares stay finite in fp32). Only vectors the size of an
    axis and the spikes are allocated: no temporary the size of the input.

    With ``log`` (the ``log_structured`` domain, for logits) the same factors are applied to exp(x): x + ln(f), so
    the softmax mass, not the logit, has the structure (per-index terms along axis 0 are per-row offsets).
    """
    if x.numel() == 0:
        return x
    dev = x.device
    base_max = max(float(x.max()), -float(x.min()))  # no full-size temporary (inputs reach gigabytes)
    if base_max == 0.0 or not math.isfinite(base_max):
        return x
    axes = [d for d in range(x.dim()) if x.shape[d] >= 2]
    heavy_cap = 10.0 ** (_HEAVY_RANGE / max(len(axes), 1))
    mean_bulk = (10.0 ** _BULK_DECADES - 1.0) / (_BULK_DECADES * 2.302585092994046)
    for d in axes:
        n = x.shape[d]
        f = torch.pow(10.0, torch.rand(n, generator=gen, device=dev) * _BULK_DECADES)
        k = min(_HEAVY_PER_AXIS, max(n // 8, 1))
        pos = torch.randperm(n, generator=gen, device=dev)[:k]
        heavy = (_HEAVY_MASS * n * mean_bulk / k) * torch.pow(10.0, torch.rand(k, generator=gen, device=dev) - 0.5)
        f[pos] = torch.clamp(heavy, max=heavy_cap)
        shape = [1] * x.dim()
        shape[d] = n
        if log:
            x.add_(f.log().view(shape).to(x.dtype))
        else:
            x.mul_(f.view(shape).to(x.dtype))
    if axes and x.is_contiguous():
        n_max = max(x.shape[d] for d in axes)
        count = max(1, min(x.numel() // 8, _SPIKES_PER_FIBER * x.numel() // n_max))
        flat = x.view(-1)
        # distinct positions: an indexed write with repeated indices is nondeterministic on CUDA, and the
        # supervisor draws the same inputs twice (to lend them, then to judge them)
        idx = torch.unique(torch.randint(0, x.numel(), (count,), generator=gen, device=dev))
        spike = (n_max * mean_bulk / _SPIKES_PER_FIBER) * torch.pow(
            10.0, torch.rand(idx.numel(), generator=gen, device=dev) - 0.5)
        if log:
            flat[idx] = flat[idx] + spike.log().to(x.dtype)
        else:
            cur = flat[idx].abs().clamp_min(torch.finfo(torch.float32).tiny)
            spike = torch.minimum(spike, (_SPIKE_LIMIT * base_max) / cur)
            flat[idx] = flat[idx] * spike.to(x.dtype)
    if offsets and x.dim() >= 2:
        rows = x.shape[0]
        per_row = max(x.numel() // rows, 1)
        step = max(1, (1 << 24) // per_row)  # row blocks: no full-size |x| temporary
        scale = torch.cat([x[i:i + step].abs().reshape(min(step, rows - i), -1).mean(dim=1)
                           for i in range(0, rows, step)])
        sign = torch.where(torch.rand(rows, generator=gen, device=dev) < 0.5, -1.0, 1.0)
        off = sign * scale * torch.pow(10.0, torch.rand(rows, generator=gen, device=dev) * _OFFSET_DECADES)
        x.add_(off.view([rows] + [1] * (x.dim() - 1)).to(x.dtype))
    return x


def sparsify(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """The ``sparse`` domain: ``_SPARSE_CARRIERS`` elements of the draw (random positions) scaled by
    (numel / carriers) x 10**U(0, 1), so a few dozen elements carry most of the tensor's mass (linear or
    squared) at any size: a whole-tensor statistic (a mean loss, a Frobenius norm) estimated from part of the
    tensor misses or double-counts some of them. Positive factors: signs are kept."""
    if x.numel() == 0:
        return x
    k = min(_SPARSE_CARRIERS, max(x.numel() // 8, 1))
    flat = x.view(-1)
    idx = torch.randperm(x.numel(), generator=gen, device=x.device)[:k] if x.numel() <= (1 << 24) else \
        torch.unique(torch.randint(0, x.numel(), (k,), generator=gen, device=x.device))  # distinct: deterministic
    f = (x.numel() / k) * torch.pow(10.0, torch.rand(idx.numel(), generator=gen, device=x.device))
    flat[idx] = flat[idx] * f.to(x.dtype)
    return x


def flip_signs(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """``x`` with each element's sign flipped with probability 1/2 (drawn from ``gen``): zeros, magnitudes and
    shape are kept, and where the last two axes are square the signs are symmetric in them, so a symmetric or
    triangular matrix stays one. Positive draws become zero-mean ones. In place, with int8 temporaries (inputs
    reach gigabytes): one byte per element, up to four where the last two axes are square (the mask, its two
    triangles and their sum)."""
    flip = torch.randint(0, 2, x.shape, generator=gen, device=x.device, dtype=torch.int8)
    if x.dim() >= 2 and x.shape[-1] == x.shape[-2]:
        flip = torch.triu(flip) + torch.triu(flip, diagonal=1).transpose(-1, -2)
    return x.mul_(flip.mul_(-2).add_(1))  # 1 - 2 * flip: -1 where flipped


def make_inputs(ns: dict, seed: int, domain: str, device, dtype: torch.dtype, broad_inputs=None) -> list:
    """Draw one input set: ``get_inputs()`` under ``seed`` on ``device``, then the domain's redraw.

    Inputs are drawn directly on the device (``torch.device`` context), so the same seed gives the same
    values wherever this runs on the same device type and torch build. The structured domains
    (``STRUCTURED_DOMAINS``, :func:`structure`) keep the draw and give it structure from a generator seeded with
    ``seed``, ``signs`` keeps it and flips signs (:func:`flip_signs`); the other non-default domains redraw i.i.d.
    values (:func:`redraw`).
    """
    dev = torch.device(device)
    with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
        torch.manual_seed(seed)
        with dev:
            raw = ns["get_inputs"]()
        if domain in KEPT_DRAW_DOMAINS:
            # Structure goes on the problem's own draw in fp32, before the cast (the same values at every
            # precision); the generator is seeded from ``seed``, so the structure is as secret as the seed.
            gen = torch.Generator(device=dev)
            gen.manual_seed(seed ^ 0x2545F4914F6CDD1D)
            raw = list(raw)
            for i, x in enumerate(raw):
                if isinstance(x, torch.Tensor) and x.is_floating_point() and (
                        broad_inputs is None or i in broad_inputs):
                    t = x.to(dev, torch.float32).contiguous()
                    if domain == "signs":
                        t = flip_signs(t, gen)
                    elif domain == "sparse":
                        t = sparsify(t, gen)
                    else:
                        t = structure(t, gen, offsets=domain == "offset", log=domain == "log_structured")
                    if domain == "simplex" and t.dim() >= 1:  # probabilities stay probabilities
                        t = t / t.sum(dim=-1, keepdim=True)
                    raw[i] = t
        inputs = [cast_value(x, dev, dtype) for x in raw]
        del raw  # (the draw's only other reference: a redraw below replaces it, never sits beside it)
        if domain != "default" and domain not in KEPT_DRAW_DOMAINS:
            gen = torch.Generator(device=dev)
            gen.manual_seed(seed ^ 0x5DEECE66D)
            for i in range(len(inputs)):
                x = inputs[i]
                if isinstance(x, torch.Tensor) and x.is_floating_point() and (
                        broad_inputs is None or i in broad_inputs):
                    shape, dt = x.shape, x.dtype
                    inputs[i] = x = None  # the old draw is freed before the new one is made
                    inputs[i] = redraw_as(shape, dt, dev, domain, gen)
                x = None
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
        small=dict(entry.get("small", {})), medium=dict(entry.get("medium", {})),
        tolerance=dict(entry.get("tolerance", {})), floor=dict(entry.get("floor", {})),
        reduced=_reduced(entry.get("reduced", []), where),
    )


def _reduced(groups: list, where: str) -> tuple:
    out = []
    for g in groups:
        if not (isinstance(g, dict) and isinstance(g.get("inputs"), list) and g["inputs"]
                and all(isinstance(i, int) and i >= 0 for i in g["inputs"]) and isinstance(g.get("dim"), int)):
            raise ProblemError(f"{where}: each 'reduced' group is {{\"inputs\": [int, ...], \"dim\": int}}, got {g!r}")
        out.append((tuple(g["inputs"]), g["dim"]))
    return tuple(out)


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
    "Problem", "ProblemError", "FAMILIES", "DOMAINS", "STRUCTURED_DOMAINS", "KEPT_DRAW_DOMAINS", "PRECISIONS",
    "structure", "sparsify", "flip_signs", "list_problems", "get_problem",
    "register_kernelbench_dir", "load_namespace", "make_inputs", "make_model", "cast_value", "problem_seed",
]

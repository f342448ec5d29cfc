"""Trusted inputs and reference outputs, drawn by the supervisor from its own secret and cached on the device.

At bf16/fp16 the reference runs in fp32 on the same (rounded) inputs and weights and is rounded once at the end:
low-precision PyTorch kernels can be far off (bf16 ``cumsum`` on CUDA is ~25% off float64), and a candidate must
not be failed for being more accurate than that.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import hmac
from collections import OrderedDict

import torch

from kbenv.problems import PRECISIONS, Problem, make_inputs, make_model
from kbenv.rewards import checks as C
from kbenv.rewards import precision as precision_contract

MODEL_SEED = 42  # public and fixed: the candidate must build the same random weights as the reference


class HarnessError(RuntimeError):
    """A fault of kbenv itself: raised loudly, never converted into a reward."""


def nbytes(x) -> int:
    return x.numel() * x.element_size() if isinstance(x, torch.Tensor) else 0


class Secret:
    """The supervisor's secret: every seed of an evaluation is an HMAC of its purpose under it."""

    def __init__(self, key: bytes):
        self._key = key

    def seed(self, *parts) -> int:
        msg = "|".join(str(p) for p in parts).encode()
        return int.from_bytes(hmac.new(self._key, msg, hashlib.sha256).digest()[:8], "big") & ((1 << 62) - 1)


@dataclasses.dataclass
class ProblemState:
    """A problem at one size and precision: its namespace, reference model and cached reference pairs."""

    problem: Problem
    size: str
    precision: str
    ns: dict
    model: torch.nn.Module  # the reference (fp32 at low precision)
    native: torch.nn.Module  # the model at the problem's precision (gives output dtypes)
    refs: OrderedDict = dataclasses.field(default_factory=OrderedDict)  # (seed, domain) -> (inputs, outputs)
    out_specs: list | None = None  # (dtype, shape) of each output
    # domain -> the tolerance its outputs are held to where the contract applies (References.contract): the
    # default domain's, and the timed domain's where timed calls draw from another (precision.timed_domain)
    contracts: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Contract:
    """What one domain's outputs are held to (the default domain's: the official and fresh calls; the timed
    domain's: the timed calls): the problem's tolerance override, tightened where the reference runs a matmul or
    convolution: at fp32 below a TF32 shortcut's error, at bf16 to a few times honest bf16 arithmetic's, each
    measured on that domain (:mod:`kbenv.rewards.precision`)."""

    tolerance: dict  # a tolerance override, as ``Problem.tolerance``
    eligible: bool  # the reference runs a tensor-core-eligible op
    # relative Frobenius: at fp32 the reference's TF32 error (precision.shortcut_errors), at bf16 PyTorch's own
    # bf16 error, at least the output's rounding (precision.bf16_errors)
    shortcut_error: float | None
    rel_frobenius: float  # the bound that results

    def facts(self) -> dict:
        return {"tensor_core_op": self.eligible, "shortcut_error": self.shortcut_error,
                "rel_frobenius": self.rel_frobenius}


def _model_bytes(st: ProblemState) -> int:
    mods = [st.model] if st.native is st.model else [st.model, st.native]
    return sum(nbytes(t) for m in mods for t in list(m.parameters()) + list(m.buffers()))


class References:
    """Per-(problem, size, precision) reference state with an LRU byte budget for cached pairs."""

    def __init__(self, device: torch.device, budget_bytes: int):
        precision_contract.ieee_fp32()  # references are IEEE fp32 (this process's setting: the supervisor's)
        self.device = device
        self.budget = budget_bytes
        self._states: OrderedDict[tuple, ProblemState] = OrderedDict()
        self._bytes = 0

    def state(self, problem: Problem, size: str, precision: str) -> ProblemState:
        key = (problem.id, size, precision)
        st = self._states.get(key)
        if st is None:
            ns = problem.namespace(size)
            try:
                native = make_model(ns, "Model", MODEL_SEED, self.device, PRECISIONS[precision])
            except torch.OutOfMemoryError:
                raise  # judged by who held the memory (memory_blame.oom_verdict)
            except Exception as e:  # noqa: BLE001
                raise HarnessError(f"{problem.id}: the reference model could not be built: {e!r}") from e
            model = native if precision == "fp32" else copy.deepcopy(native).float()
            st = ProblemState(problem, size, precision, ns, model, native)
            self._states[key] = st
        self._states.move_to_end(key)
        return st

    def inputs(self, st: ProblemState, seed: int, domain: str) -> list:
        try:
            return make_inputs(st.ns, seed, domain, self.device, PRECISIONS[st.precision], st.problem.broad_inputs)
        except torch.OutOfMemoryError:
            raise  # judged by who held the memory (memory_blame.oom_verdict), never a fault of the reference
        except Exception as e:  # noqa: BLE001
            raise HarnessError(f"{st.problem.id}: inputs could not be drawn on domain {domain}: {e!r}") from e

    def pair(self, st: ProblemState, seed: int, domain: str, cache: bool = True) -> tuple[list, list]:
        """Trusted inputs and reference outputs for a seed and domain."""
        key = (seed, domain)
        if key in st.refs:
            st.refs.move_to_end(key)
            return st.refs[key]
        inputs = self.inputs(st, seed, domain)
        outs = self.outputs(st, inputs, domain)
        if cache:
            st.refs[key] = (inputs, outs)
            self._bytes += sum(nbytes(x) for x in list(inputs) + outs)
            self._evict()
        return inputs, outs

    def cached(self, st: ProblemState, seed: int, domain: str) -> tuple[list, list] | None:
        """The cached pair for a seed and domain, or None (nothing is drawn or computed)."""
        key = (seed, domain)
        if key in st.refs:
            st.refs.move_to_end(key)
            return st.refs[key]
        return None

    def outputs(self, st: ProblemState, inputs: list, domain: str = "default") -> list:
        dtype = PRECISIONS[st.precision]
        up = [x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() and dtype != torch.float32 else x
              for x in inputs]
        try:
            with torch.no_grad():
                out = st.model(*up)
                outs = [o.detach() for o in (out if isinstance(out, (tuple, list)) else [out])]
                if st.out_specs is None:
                    nat = st.native(*inputs) if dtype != torch.float32 else out
                    nat = nat if isinstance(nat, (tuple, list)) else [nat]
                    st.out_specs = [(o.dtype, tuple(o.shape)) for o in nat]
                    del nat
        except torch.OutOfMemoryError:
            raise  # judged by who held the memory (memory_blame.oom_verdict), never a fault of the reference
        except Exception as e:  # noqa: BLE001
            raise HarnessError(f"{st.problem.id}: the reference raised on domain {domain}: {e!r}") from e
        if dtype != torch.float32:
            outs = [o.to(d) for o, (d, _) in zip(outs, st.out_specs)]
        return outs

    def contract(self, st: ProblemState, seed: int, domain: str = "default") -> Contract:
        """The tolerance of ``st``'s outputs on ``domain``, measured once on its pair for ``seed`` (the official
        pair for the default domain: already cached), where the reference runs a matmul or convolution (found on
        meta tensors; :mod:`kbenv.rewards.precision`). At fp32 it runs again on
        operands rounded to TF32 and, on cuda, with TF32 switched on for that forward (process-wide switches:
        this runs at an evaluation's start, before any other work of it, and a supervisor runs one evaluation at
        a time); each forward's memory is that of a broader-domain pair. At bf16 the fp32 reference and the
        problem's native bf16 model run once each (the memory plan's contract term)."""
        if domain not in st.contracts:
            tol = C.tolerances(st.precision, st.problem.tolerance)["rel_frobenius"]
            fp32 = st.precision == "fp32"
            inputs, outs = self.pair(st, seed, domain, cache=domain == "default")  # the official pair is cached
            try:
                if fp32:
                    eligible, errors = precision_contract.shortcut_errors(st.model, inputs, outs)
                else:
                    eligible, errors = precision_contract.bf16_errors(st.model, st.native, inputs,
                                                                      PRECISIONS[st.precision])
            except torch.OutOfMemoryError:
                raise  # judged by who held the memory (memory_blame.oom_verdict)
            except Exception as e:  # noqa: BLE001
                what = "on TF32-rounded operands" if fp32 else f"in {st.precision}"
                raise HarnessError(f"{st.problem.id}: the reference failed {what} on domain {domain}: {e!r}") from e
            del inputs, outs
            bound = (precision_contract.downgrade_bound if fp32 else precision_contract.rounding_bound)(
                errors, eligible, tol)
            override = {k: dict(v) if isinstance(v, dict) else v for k, v in (st.problem.tolerance or {}).items()}
            if bound < tol:
                override.setdefault(st.precision, {})["rel_frobenius"] = bound
            measured = [e for e in errors if e is not None]
            st.contracts[domain] = Contract(override, eligible, min(measured) if measured else None, bound)
        return st.contracts[domain]

    def _evict(self) -> None:
        while self._bytes > self.budget:
            victim = next((s for s in self._states.values() if s.refs), None)
            if victim is None:
                break
            _, (inp, outs) = victim.refs.popitem(last=False)
            self._bytes -= sum(nbytes(x) for x in list(inp) + outs)

    def fit(self, budget_bytes: int, keep: tuple) -> None:
        """Hold at most ``budget_bytes`` beyond the current problem's own model (the memory plan's reference cache
        for this evaluation): other problems' reference models go first (least recently used), then cached pairs."""
        self.budget = int(budget_bytes)
        others = [k for k in self._states if k != keep]
        held = self._bytes + sum(_model_bytes(self._states[k]) for k in others)
        for k in others:
            if held <= self.budget:
                break
            st = self._states.pop(k)
            held -= _model_bytes(st) + sum(nbytes(x) for inp, outs in st.refs.values() for x in list(inp) + outs)
            self._bytes -= sum(nbytes(x) for inp, outs in st.refs.values() for x in list(inp) + outs)
        self._evict()

    def clear(self) -> None:
        """Drop every reference model and cached pair (the supervisor is closing)."""
        self.drop_cached()
        self._states.clear()

    def drop_cached(self) -> None:
        """Free every cached pair (the supervisor needs the memory for a check)."""
        for st in self._states.values():
            st.refs.clear()
        self._bytes = 0

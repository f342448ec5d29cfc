"""``EvalRequest`` and ``EvalResult``: the contract between kbenv and the sandbox (``docs/result-schema.md``)."""

from __future__ import annotations

import dataclasses
import hashlib
import math

from kbenv.rewards.reward import compute_reward

CATEGORIES = (
    "format", "compile", "runtime", "timeout", "crash", "oom", "sandbox_violation", "wrong_type", "wrong_shape",
    "nonfinite", "inaccurate", "unwritten", "invariant", "aliasing", "mutation", "nondeterministic",
    "distribution", "decoy", "timing_escape", "timing_tamper", "replay", "impossible_speed",
)


@dataclasses.dataclass
class EvalRequest:
    """One candidate to evaluate.

    Attributes:
        problem: problem id (``kernelbench/level1/23``).
        candidate: the candidate's Python source (already extracted from the model's reply).
        size: ``small`` (CPU-interpreter sizes) or ``full`` (KernelBench's sizes).
        precision: ``fp32``/``bf16``; None takes the problem's default.
        reward_fn: ``amdahl`` (default), ``speedup`` or ``fast_p``.
        profile: workload profile whose op-family share weights ``amdahl`` (a shipped name or a path).
        share: an explicit share s in [0, 1] overriding the profile.
        fast_p: threshold p of the ``fast_p`` reward.
        measure_time: time the candidate (False: correctness and decoy checks only, speedup null).
        next_problem: a hint, the problem of the request this evaluator will likely get next
            (``EvaluatorPool.map`` sets it). It decides only what is prepared ahead of that request: a baseline
            set opened for this same problem when the hint names it or is None, else imported baseline processes
            started for whichever problem comes (a sweep of distinct problems opened and closed a set per
            evaluation). Never a verdict, a timing or a reward.
    """

    problem: str
    candidate: str
    size: str = "small"
    precision: str | None = None
    reward_fn: str = "amdahl"
    profile: str | None = None
    share: float | None = None
    fast_p: float = 1.0
    measure_time: bool = True
    next_problem: str | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "EvalRequest":
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


def candidate_hash(source) -> str:
    """The candidate's identity in records (``candidate_sha256``): its text's hash, lone surrogates included
    (``protocol.source_fault`` refuses such a source, or one that is not text at all; the result still names it)."""
    text = source if isinstance(source, str) else repr(source)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclasses.dataclass
class EvalResult:
    """The outcome of one evaluation; ``to_dict()`` is the msgpack/JSON record (docs/result-schema.md)."""

    problem: str
    family: str
    device: str
    gpu: str | None
    size: str
    precision: str
    candidate_sha256: str
    verdict: str = "fail"
    category: str | None = None
    reason: str = ""
    correct: bool = False
    reward: float = 0.0
    reward_fn: str = "amdahl"
    reward_components: dict = dataclasses.field(default_factory=dict)
    speedup: float | None = None
    speedup_meaningful: bool = False
    baseline: dict = dataclasses.field(default_factory=dict)
    timings: dict = dataclasses.field(default_factory=dict)
    checks: list = dataclasses.field(default_factory=list)
    error: str | None = None
    phase_seconds: dict = dataclasses.field(default_factory=dict)
    facts: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def empty(cls, req: EvalRequest, problem, precision: str, device, share: float) -> "EvalResult":
        gpu = None
        if device.type == "cuda":
            import torch
            gpu = torch.cuda.get_device_name(device)
        return cls(problem=problem.id, family=problem.family, device=device.type, gpu=gpu, size=req.size,
                   precision=precision, candidate_sha256=candidate_hash(req.candidate),
                   reward_fn=req.reward_fn, speedup_meaningful=(device.type == "cuda"),
                   facts={"share": share})

    @classmethod
    def format_failure(cls, req: EvalRequest, problem, precision: str, device: str, reason: str,
                       category: str = "format") -> "EvalResult":
        """A failure decided before any evaluation: a reply with no candidate (``format``), or a source the sandbox
        refuses to take (``compile``: ``protocol.source_fault``)."""
        r = cls(problem=problem.id, family=problem.family, device=device, gpu=None, size=req.size,
                precision=precision, candidate_sha256=candidate_hash(req.candidate),
                reward_fn=req.reward_fn)
        r.fail(category, reason)
        r.finalize_reward(req.reward_fn, 0.0, req.fast_p)
        return r

    def fail(self, category: str, reason: str, error: str | None = None) -> None:
        assert category in CATEGORIES, category
        self.verdict, self.category, self.reason = "fail", category, reason
        if error:
            self.error = error[-4000:]

    def set_verdict(self, verdict) -> None:
        self.checks = [c.to_dict() for c in verdict.checks]
        self.correct = bool(verdict.correct)
        if verdict.passed:
            self.verdict, self.category, self.reason = "pass", None, verdict.reason
        else:
            self.fail(verdict.category, verdict.reason)

    def finalize_reward(self, reward_fn: str, share: float, p: float) -> None:
        gate = self.verdict == "pass"
        sigma = self.speedup if gate else None
        if gate and (sigma is None or not self.speedup_meaningful):
            sigma = 1.0  # cpu: the interpreter's speed says nothing about the GPU; no speed credit either way
        self.reward, self.reward_components = compute_reward(reward_fn, gate, sigma, share, p)
        self.reward_components["speedup_measured"] = self.speedup
        self.reward_fn = reward_fn
        if not math.isfinite(self.reward):
            raise ValueError(f"non-finite reward {self.reward}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "EvalResult":
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})

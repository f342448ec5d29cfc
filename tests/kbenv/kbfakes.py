"""Test doubles for kbenv's unit tests: an evaluator pool that decides verdicts without a sandbox.

Integration tests use the real pool (the ``pool`` fixture); these keep the env, CLI and trainer glue testable
on their own, in a second, without Ray.
"""

from __future__ import annotations


from kbenv.problems import get_problem
from kbenv.sandbox.result import EvalRequest, EvalResult, candidate_hash

#: A candidate holding this text passes in the fake pool; any other candidate fails as ``inaccurate``.
PASS_MARK = "torch.relu"


class FakePool:
    """``evaluate``/``map`` like an EvaluatorPool; records every request; ``closed`` after :meth:`close`."""

    def __init__(self, device: str = "cpu", n: int = 1):
        self.device = device
        self.requests: list[EvalRequest] = []
        self.closed = False
        self.n = n

    def __len__(self) -> int:
        return self.n

    def info(self) -> list[dict]:
        return [{"device": self.device, "fake": True}]

    def evaluate(self, req: EvalRequest) -> EvalResult:
        self.requests.append(req)
        prob = get_problem(req.problem)
        res = EvalResult(problem=prob.id, family=prob.family, device=self.device, gpu=None, size=req.size,
                         precision=req.precision or prob.precision_default,
                         candidate_sha256=candidate_hash(req.candidate), reward_fn=req.reward_fn)
        if PASS_MARK in req.candidate:
            res.verdict, res.correct, res.reason, res.reward, res.speedup = "pass", True, "every check passed", 1.0, 1.0
        else:
            res.fail("inaccurate", "outputs differ from the reference")
        return res

    def map(self, reqs):
        for i, r in enumerate(list(reqs)):
            yield i, self.evaluate(r)

    def close(self) -> None:
        self.closed = True


GOOD = ("```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        return torch.relu(x)\n```")
BAD = "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 0\n```"


class SuiteFakePool(FakePool):
    """A fake pool that answers the known-bad suite as a sound deployment would (``honest=True``: each case in
    its first expected category, known-good kernels pass), or passes everything (``honest=False``)."""

    def __init__(self, device: str = "cpu", honest: bool = True, **kwargs):
        super().__init__(device)
        from kbenv.agents.scripted import KnownGoodPolicy, known_bad_suite
        from kbenv.prompts import extract_code
        self.honest, self.kwargs = honest, kwargs
        self.cases = {c.source: c for c in known_bad_suite()}
        good = KnownGoodPolicy()
        self.goods = {extract_code(good.act({"problem_id": pid})) for pid in good.problems()}

    def evaluate(self, req: EvalRequest) -> EvalResult:
        res = super().evaluate(req)
        case = self.cases.get(req.candidate)
        sound_pass = case is None or (case.expect_sandbox and "pass" in case.expect_sandbox) or \
            "pass" in case.expected_on(self.device)
        if not self.honest or sound_pass:
            res.verdict, res.category, res.correct, res.reward, res.speedup = "pass", None, True, 1.0, 1.0
        else:
            res.fail(case.expected_on(self.device)[0], "rejected as expected")
            res.reward = 0.0
        return res

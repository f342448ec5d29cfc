"""Gymnasium environments: one episode is one problem; an action is the model's reply text.

``kbenv/KernelBench-v0`` (KernelBench level 1) and ``kbenv/DLRMBench-v0`` (DLRM-Bench) are registered on
import of :mod:`kbenv`.

Observation (``gymnasium.spaces.Dict`` of ``Text`` and ``Discrete``):
    ``system``: the system message; ``prompt``: the full user message for this turn (instructions for the
    backend naming the GPU and precision, the problem's source, and from turn 1 on the previous answer and its
    feedback); ``problem_id``; ``feedback``: the last evaluation's feedback ("" on turn 0); ``turn``: 0-based.

Action:
    The model's reply (``Text``). The code is extracted from it (:func:`kbenv.prompts.extract_code`); a reply
    with no ``ModelNew`` is a ``format`` failure with reward 0.

Reward:
    The selected reward function's value for this turn's candidate (``kbenv.rewards.reward``): 0 for any
    failed check.

Episode end:
    ``terminated`` is True when the candidate passed every check and ``stop_on_pass`` is set (default): the
    problem is solved. ``truncated`` is True when ``max_turns`` turns were used without termination. Both are
    False otherwise; after either, ``reset`` must be called before ``step``.

Info (from ``step``):
    ``result``: the whole evaluation result (``docs/result-schema.md``); ``turn``; ``code``: the extracted
    source or None. From ``reset``: ``problem`` (its manifest description).

Arguments:
    problems: problem ids, or None for the whole set. set_name: ``kernelbench`` or ``dlrm``. backend:
    ``triton`` or ``cuda``. max_turns: turns per episode (default 3). size: ``small``/``full``/``auto`` (full
    on cuda, small on cpu). precision: None for the problem's default. reward_fn, profile: see
    :mod:`kbenv.rewards.reward`. device: ``auto``/``cuda``/``cpu``. evaluator: anything with
    ``evaluate(EvalRequest) -> EvalResult`` (an :class:`~kbenv.sandbox.actor.EvaluatorPool` by default, which
    starts a local Ray cluster on demand, or connects to ``address``).

Version history:
    v0: initial release.
"""

from __future__ import annotations

import string

import gymnasium as gym
from gymnasium import spaces

from kbenv.problems import get_problem, list_problems
from kbenv.prompts import extract_code, feedback_prompt, problem_prompt, system_prompt
from kbenv.sandbox.result import EvalRequest, EvalResult

CHARSET = string.printable  # ASCII printable plus \t\n\r\x0b\x0c; other characters are replaced by '?'
MAX_TEXT = 200_000


def sanitize(text: str) -> str:
    allowed = set(CHARSET)
    return "".join(c if c in allowed else "?" for c in text)[:MAX_TEXT]


def format_feedback(res: EvalResult | dict, max_error_chars: int = 2000) -> str:
    """Feedback for the next turn: verdict, failed checks with their figures, error tail, timings."""
    r = res.to_dict() if isinstance(res, EvalResult) else res
    lines = [f"verdict: {r['verdict']}" + (f" ({r['category']})" if r.get("category") else ""),
             f"reason: {r['reason']}"]
    failed = [c for c in r.get("checks", []) if not c["passed"]]
    for c in failed[:8]:
        fig = f" value={c['value']}" if c.get("value") is not None else ""
        thr = f" threshold={c['threshold']}" if c.get("threshold") is not None else ""
        lines.append(f"failed check {c['name']}:{fig}{thr} {c.get('detail', '')}")
    if r.get("error"):
        lines.append("error:\n" + r["error"][-max_error_chars:])
    t = r.get("timings") or {}
    if t.get("median_ms") is not None:
        base = r.get("baseline") or {}
        lines.append(f"your kernel: {t['median_ms']:.4f} ms median over {t.get('trials')} trials; baseline "
                     f"({base.get('best')}): {base.get('best_ms', float('nan')):.4f} ms; speedup "
                     f"{r.get('speedup') or float('nan'):.3f}x"
                     + ("" if r.get("speedup_meaningful") else " (CPU interpreter timing: not a GPU figure)"))
    return sanitize("\n".join(lines))


class KernelEnv(gym.Env):
    metadata = {"render_modes": ["ansi"]}

    def __init__(self, problems=None, set_name: str = "kernelbench", backend: str = "triton", max_turns: int = 3,
                 size: str = "auto", precision: str | None = None, reward_fn: str = "amdahl",
                 profile: str | None = None, device: str = "auto", evaluator=None, address: str | None = None,
                 stop_on_pass: bool = True, render_mode: str | None = None):
        if backend not in ("triton", "cuda"):
            raise ValueError("backend must be 'triton' or 'cuda'")
        self.problem_ids = [p.id for p in list_problems(set_name)] if problems is None else \
            ([problems] if isinstance(problems, str) else list(problems))
        for pid in self.problem_ids:
            get_problem(pid)
        self.backend, self.max_turns, self.precision = backend, int(max_turns), precision
        self.reward_fn, self.profile, self.stop_on_pass = reward_fn, profile, stop_on_pass
        self._device_arg, self._address = device, address
        self._evaluator = evaluator
        self.render_mode = render_mode
        self._size_arg = size
        text = spaces.Text(max_length=MAX_TEXT, min_length=0, charset=CHARSET)
        self.observation_space = spaces.Dict({
            "system": text, "prompt": text, "problem_id": spaces.Text(max_length=200, charset=CHARSET),
            "feedback": text, "turn": spaces.Discrete(self.max_turns + 1)})
        self.action_space = spaces.Text(max_length=MAX_TEXT, min_length=0, charset=CHARSET)
        self._problem = None
        self._turn = 0
        self._done = True
        self._last_code = None
        self._last_feedback = ""
        self._last_result = None

    # -- evaluator (lazy: constructing the env starts nothing) ----------------------------------------------
    @property
    def evaluator(self):
        if self._evaluator is None:
            from kbenv.sandbox.actor import EvaluatorPool
            self._evaluator = EvaluatorPool(device=self._device_arg, address=self._address)
        return self._evaluator

    @property
    def device(self) -> str:
        if self._evaluator is not None and hasattr(self._evaluator, "device"):
            d = self._evaluator.device
            return d if isinstance(d, str) else d.type
        if self._device_arg != "auto":
            return self._device_arg
        import torch
        return "cuda" if torch.cuda.is_available() else "cpu"

    @property
    def size(self) -> str:
        if self._size_arg != "auto":
            return self._size_arg
        return "full" if self.device.startswith("cuda") else "small"

    def _gpu_name(self) -> str | None:
        if self.device.startswith("cuda"):
            import torch
            return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        return None

    def _obs(self) -> dict:
        p = self._problem
        prec = self.precision or p.precision_default
        if self._turn == 0:
            prompt = problem_prompt(p.source, self.backend, self._gpu_name(), prec, self.device)
        else:
            prompt = feedback_prompt(p.source, self._last_code, self._last_feedback, self.backend,
                                     self._gpu_name(), prec, self.device)
        return {"system": system_prompt(self.backend), "prompt": sanitize(prompt), "problem_id": p.id,
                "feedback": self._last_feedback, "turn": self._turn}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = options or {}
        pid = options.get("problem")
        if pid is None:
            pid = self.problem_ids[int(self.np_random.integers(len(self.problem_ids)))]
        elif pid not in self.problem_ids:
            raise ValueError(f"problem {pid!r} is not in this environment's problem list")
        self._problem = get_problem(pid)
        self._turn, self._done = 0, False
        self._last_code, self._last_feedback, self._last_result = None, "", None
        return self._obs(), {"problem": self._problem.describe()}

    def make_request(self, action: str) -> tuple[EvalRequest | None, str | None]:
        code = extract_code(action)
        req = EvalRequest(problem=self._problem.id, candidate=code or (action if isinstance(action, str) else ""),
                          size=self.size, precision=self.precision, reward_fn=self.reward_fn, profile=self.profile)
        return (req if code else None), code

    def step(self, action: str):
        if self._done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        req, code = self.make_request(action)
        if req is None:
            prec = self.precision or self._problem.precision_default
            result = EvalResult.format_failure(
                EvalRequest(problem=self._problem.id, candidate=str(action), size=self.size,
                            reward_fn=self.reward_fn), self._problem, prec, self.device,
                "no ```python block defining class ModelNew was found in the reply")
        else:
            result = self.evaluator.evaluate(req)
        return self.finish_step(result, code)

    def finish_step(self, result: EvalResult, code: str | None):
        """Advance the episode with an evaluation result (used by ``step`` and by batched evaluators)."""
        self._last_result = result
        self._last_code = code
        self._last_feedback = format_feedback(result)
        self._turn += 1
        terminated = bool(self.stop_on_pass and result.verdict == "pass")
        truncated = (not terminated) and self._turn >= self.max_turns
        self._done = terminated or truncated
        obs = self._obs()
        info = {"result": result.to_dict(), "turn": self._turn - 1, "code": code}
        return obs, float(result.reward), terminated, truncated, info

    def render(self):
        if self.render_mode == "ansi":
            return self._last_feedback or (self._problem.id if self._problem else "")
        return None

    def close(self):
        pass


def make_kernelbench_env(**kwargs) -> KernelEnv:
    return KernelEnv(set_name="kernelbench", **kwargs)


def make_dlrm_env(**kwargs) -> KernelEnv:
    return KernelEnv(set_name="dlrm", **kwargs)


def register_envs() -> None:
    if "kbenv/KernelBench-v0" not in gym.registry:
        gym.register(id="kbenv/KernelBench-v0", entry_point="kbenv.env:make_kernelbench_env",
                     disable_env_checker=True)
        gym.register(id="kbenv/DLRMBench-v0", entry_point="kbenv.env:make_dlrm_env", disable_env_checker=True)

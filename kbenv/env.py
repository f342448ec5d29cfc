"""Gymnasium environments: one episode is one problem; an action is the model's reply text.

``kbenv/KernelBench-v4`` (KernelBench level 1) and ``kbenv/DLRMBench-v4`` (DLRM-Bench) are registered on
import of :mod:`kbenv`. See :class:`KernelEnv` for the contract (observation, action, reward, episode end,
info, arguments).

Version history:
    v4: timed calls of matmul and convolution problems draw zero-mean inputs (``rewards/precision.py``,
        ``timed_domain``; 13-15 gain the ``signs`` domain for it), held to the contract measured on that domain,
        so a path only the positive official inputs take is never timed; speedups of those problems change.
        Asking for ``-v0`` to ``-v3`` raises ``gymnasium.error.DeprecatedEnv`` naming ``-v4``.
    v3: the bf16 contract (``rewards/precision.py``): at bf16, matmul and convolution problems' default-domain
        outputs are held to three times PyTorch's own bf16 error instead of the fixed 2e-2. Asking for ``-v0``,
        ``-v1`` or ``-v2`` raises ``gymnasium.error.DeprecatedEnv`` naming ``-v3``.
    v2: the fp32 contract: fp32 matmul and convolution problems are held to a bound a TF32 shortcut cannot meet;
        references and baselines compute IEEE fp32.
    v1: rewards from the rewritten verifier and sandbox (per-phase limits, hardened measurement), so a v0 reward
        and a v1 reward are not comparable; ``reset(options={"problem_id": ...})``; the ``messages``
        observation key and ``chat="history"``. Asking for ``-v0`` raises ``gymnasium.error.DeprecatedEnv``
        naming ``-v1``.
    v0: initial release (no longer registered).
"""

from __future__ import annotations

import string

import gymnasium as gym
from gymnasium import spaces

from kbenv import step as _step
from kbenv.config import timing_overrides
from kbenv.problems import get_problem, list_problems
from kbenv.prompts import feedback_prompt, followup_prompt, problem_prompt, system_prompt
from kbenv.sandbox.result import EvalResult

ENV_VERSION = "v4"  # v4: zero-mean timed inputs where the contract applies (v3: the bf16 contract; v2: fp32's)
ENV_IDS = {"kernelbench": f"kbenv/KernelBench-{ENV_VERSION}", "dlrm": f"kbenv/DLRMBench-{ENV_VERSION}"}

CHARSET = string.printable  # ASCII printable plus \t\n\r\x0b\x0c; other characters are replaced by '?'
MAX_TEXT = 200_000
CHAT_MODES = ("resend", "history")


def sanitize(text: str) -> str:
    allowed = set(CHARSET)
    return "".join(c if c in allowed else "?" for c in text)[:MAX_TEXT]


class ReplyText(spaces.Text):
    """The action space: any string a model can write.

    ``contains`` is True for every ``str`` (any characters, any length: ``step`` accepts them all and extracts
    the code itself); ``sample`` draws printable ASCII of at most ``max_length`` characters, as ``Text`` does.
    """

    def contains(self, x) -> bool:
        return isinstance(x, str)

    def __repr__(self) -> str:
        return f"ReplyText(max_length={self.max_length})"

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
    """One GPU-kernel problem per episode; the agent answers with text, a verifier scores it.

    Observation (``gymnasium.spaces.Dict``):
        ``system`` (Text): the system message.
        ``prompt`` (Text): the user message for this turn. Turn 0: instructions for the backend naming the GPU
            and precision, then the problem's source. Later turns: with ``chat="resend"`` (default) the whole
            turn-0 message again plus the previous answer and its feedback; with ``chat="history"`` only the
            feedback on the previous answer (the conversation so far is in ``messages``).
        ``messages`` (Sequence of Dict ``role``/``content``): the chat to send to the model for this turn.
            ``resend``: ``[system, user(prompt)]``. ``history``: the growing conversation, ``[system,
            user(turn-0 prompt), assistant(reply 0), user(feedback 0), ...]``, as verifiers' ``MultiTurnEnv``
            keeps it.
        ``problem_id`` (Text): the problem's stable id, e.g. ``kernelbench/level1/23``.
        ``feedback`` (Text): the last evaluation's feedback ("" on turn 0).
        ``turn`` (Discrete): 0-based turn number.
        Text is printable ASCII; other characters are replaced by ``?``.

    Action:
        The model's reply (:class:`ReplyText`: any ``str``). The code is extracted from it
        (:func:`kbenv.prompts.extract_code`); a reply with no ``ModelNew`` is a ``format`` failure with reward 0,
        decided without an evaluation.

    Reward:
        The selected reward function's value for this turn's candidate (``kbenv.rewards.reward``): 0 for any
        failed check. A fault of the harness itself raises (it is never a reward).

    Episode end:
        ``terminated`` is True when the candidate passed every check and ``stop_on_pass`` is set (default): the
        problem is solved. ``truncated`` is True when ``max_turns`` turns were used without termination. Both are
        False otherwise; after either, :meth:`reset` must be called before :meth:`step`.

    Info:
        From :meth:`reset`: ``problem`` (its manifest description). From :meth:`step`: ``result`` (the whole
        evaluation result, ``docs/result-schema.md``), ``turn`` (the turn just played), ``code`` (the extracted
        source or None).

    Args:
        problems: problem ids, or None for the whole set.
        set_name: ``kernelbench`` or ``dlrm``.
        backend: ``triton`` or ``cuda`` (what the prompt asks for).
        max_turns: turns per episode (default 3).
        size: ``small``/``full``/``auto`` (full on cuda, small on cpu); other tiers the sandbox offers
            (``medium``) are passed through.
        precision: None for each problem's default, or ``fp32``/``bf16``.
        reward_fn, profile: see :mod:`kbenv.rewards.reward`.
        device: ``auto``/``cuda``/``cpu``.
        evaluator: anything with ``evaluate(EvalRequest) -> EvalResult`` (and optionally ``map``). By default an
            :class:`~kbenv.sandbox.actor.EvaluatorPool` is started on the first :meth:`step` (a local Ray cluster
            on demand, or ``address``); :meth:`close` stops it. An evaluator passed in is never closed here.
        address: a Ray cluster to join for the default evaluator.
        limits: per-phase deadlines in seconds for the default evaluator, e.g. ``{"compile_s": 60,
            "trial_s": 20, "timing_s": 120}`` (the sandbox Supervisor's ``limits``).
        timing_budget: seconds of paired timing per evaluation for the default evaluator, unless the ratio is
            settled sooner (None: the default, 3 s on cuda; less is more evaluations per GPU-hour and noisier
            speedups: :func:`kbenv.config.timing_overrides`).
        stop_on_pass: end the episode on the first passing candidate.
        chat: ``resend`` (each turn one self-contained prompt) or ``history`` (the chat grows turn by turn).
        render_mode: None or ``ansi``.

    Raises (at construction):
        ValueError: an unknown backend, chat mode or render mode.
        KeyError: an unknown problem id.
        MemoryPlanError: a ``ValueError`` subclass; an evaluation at this size would not fit the device's or
            the host's memory (its message names the size that fits).
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, problems=None, set_name: str = "kernelbench", backend: str = "triton", max_turns: int = 3,
                 size: str = "auto", precision: str | None = None, reward_fn: str = "amdahl",
                 profile: str | None = None, device: str = "auto", evaluator=None, address: str | None = None,
                 limits: dict | None = None, stop_on_pass: bool = True, chat: str = "resend",
                 render_mode: str | None = None, timing_budget: float | None = None):
        if backend not in ("triton", "cuda"):
            raise ValueError(f"backend must be 'triton' or 'cuda', got {backend!r}")
        if chat not in CHAT_MODES:
            raise ValueError(f"chat must be one of {CHAT_MODES}, got {chat!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, "
                             f"got {render_mode!r}")
        self.problem_ids = [p.id for p in list_problems(set_name)] if problems is None else \
            ([problems] if isinstance(problems, str) else list(problems))
        for pid in self.problem_ids:
            get_problem(pid)
        self.backend, self.max_turns, self.precision = backend, int(max_turns), precision
        self.reward_fn, self.profile, self.stop_on_pass, self.chat = reward_fn, profile, stop_on_pass, chat
        self._device_arg, self._address, self._limits = device, address, dict(limits) if limits else None
        self._timing = timing_overrides(timing_budget, "timing_budget")
        self._evaluator = evaluator
        self._owns_evaluator = False
        self.render_mode = render_mode
        self._size_arg = size
        _step.preflight(self.problem_ids, self.size, self.precision, self.device)
        text = spaces.Text(max_length=MAX_TEXT, min_length=0, charset=CHARSET)
        message = spaces.Dict({"role": spaces.Text(max_length=16, charset=CHARSET), "content": text})
        self.observation_space = spaces.Dict({
            "system": text, "prompt": text, "messages": spaces.Sequence(message),
            "problem_id": spaces.Text(max_length=200, charset=CHARSET), "feedback": text,
            "turn": spaces.Discrete(self.max_turns + 1)})
        self.action_space = ReplyText(max_length=MAX_TEXT, min_length=0, charset=CHARSET)
        self._problem = None
        self._turn = 0
        self._done = True
        self._last_code = None
        self._last_feedback = ""
        self._last_result = None
        self._messages: list[dict] = []

    # -- evaluator (lazy: constructing the env starts nothing) ----------------------------------------------
    @property
    def evaluator(self):
        """The evaluator; the default pool is started on first use and stopped by :meth:`close`."""
        if self._evaluator is None:
            from kbenv.sandbox.actor import EvaluatorPool
            config = {**({"limits": self._limits} if self._limits else {}),
                      **({"timing": self._timing} if self._timing else {})}
            self._evaluator = EvaluatorPool(device=self._device_arg, address=self._address, config=config or None)
            self._owns_evaluator = True
        return self._evaluator

    @property
    def device(self) -> str:
        """``cuda`` or ``cpu``: the evaluator's device, else the ``device`` argument resolved."""
        if self._evaluator is not None and hasattr(self._evaluator, "device"):
            return _step.device_type(self._evaluator)
        return _step.device_type(_step.resolve_device(self._device_arg))

    @property
    def size(self) -> str:
        """The size tier candidates are evaluated at (``auto`` resolved by :func:`kbenv.step.resolve_size`)."""
        return _step.resolve_size(self._size_arg, self.device)

    def _gpu_name(self) -> str | None:
        if self.device == "cuda":
            import torch
            return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        return None

    def _obs(self) -> dict:
        p = self._problem
        prec = self.precision or p.precision_default
        system = system_prompt(self.backend)
        if self._turn == 0:
            prompt = problem_prompt(p.source, self.backend, self._gpu_name(), prec, self.device)
        elif self.chat == "history":
            prompt = followup_prompt(self._last_feedback)
        else:
            prompt = feedback_prompt(p.source, self._last_code, self._last_feedback, self.backend,
                                     self._gpu_name(), prec, self.device)
        prompt = sanitize(prompt)
        if self.chat == "history":
            if self._turn == 0:
                self._messages = [{"role": "system", "content": system}]
            self._messages.append({"role": "user", "content": prompt})
            messages = tuple(dict(m) for m in self._messages)
        else:
            messages = ({"role": "system", "content": system}, {"role": "user", "content": prompt})
        return {"system": system, "prompt": prompt, "messages": messages, "problem_id": p.id,
                "feedback": self._last_feedback, "turn": self._turn}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode on one problem.

        Args:
            seed: seeds the choice of problem when ``options`` names none (same seed, same problem).
            options: ``{"problem_id": ID}`` to choose the problem (``"problem"`` is accepted as an alias).

        Returns:
            ``(observation, info)``; ``info["problem"]`` is the problem's manifest description.

        Raises:
            ValueError: the problem named is not in this environment's problem list, or ``options`` holds a key
                this method does not know.
        """
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = sorted(set(options) - {"problem_id", "problem"})
        if unknown:
            raise ValueError(f"unknown reset option(s) {unknown}; the known one is 'problem_id'")
        pid = options.get("problem_id", options.get("problem"))
        if pid is None:
            pid = self.problem_ids[int(self.np_random.integers(len(self.problem_ids)))]
        elif pid not in self.problem_ids:
            raise ValueError(f"problem {pid!r} is not in this environment's problem list")
        self._problem = get_problem(pid)
        self._turn, self._done = 0, False
        self._last_code, self._last_feedback, self._last_result = None, "", None
        return self._obs(), {"problem": self._problem.describe()}

    def prepare(self, action) -> _step.Prepared:
        """Turn an action into a request, or into its result when no evaluation is needed (a format failure).

        Batched callers (the vector env, the rollout runner) evaluate many prepared actions together with
        :func:`kbenv.step.evaluate`, then hand each result to :meth:`advance`; :meth:`step` is the two in one.
        """
        if self._done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        return _step.prepare(action, self._problem.id, size=self.size, device=self.device,
                             precision=self.precision, reward_fn=self.reward_fn, profile=self.profile)

    def step(self, action: str):
        """Evaluate one reply.

        Args:
            action: the model's reply text (any string; the code block is extracted from it).

        Returns:
            ``(observation, reward, terminated, truncated, info)`` as described in the class docstring.

        Raises:
            RuntimeError: the episode has ended (call :meth:`reset`).
            Exception: a harness fault (for example ``ray.exceptions.RayActorError``); never turned into a reward.
        """
        prepared = self.prepare(action)
        result = prepared.result if prepared.result is not None else self.evaluator.evaluate(prepared.request)
        return self.advance(prepared, result)

    def advance(self, prepared: _step.Prepared, result: EvalResult):
        """Advance the episode with the result of a prepared action; returns what :meth:`step` returns."""
        if self._done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        self._last_result = result
        self._last_code = prepared.code
        self._last_feedback = format_feedback(result)
        if self.chat == "history":
            self._messages.append({"role": "assistant", "content": sanitize(prepared.reply)})
        self._turn += 1
        terminated = bool(self.stop_on_pass and result.verdict == "pass")
        truncated = (not terminated) and self._turn >= self.max_turns
        self._done = terminated or truncated
        obs = self._obs()
        info = {"result": result.to_dict(), "turn": self._turn - 1, "code": prepared.code}
        return obs, float(result.reward), terminated, truncated, info

    def render(self):
        """``ansi``: the last feedback (or the problem id before the first step); None without a render mode."""
        if self.render_mode == "ansi":
            return self._last_feedback or (self._problem.id if self._problem else "")
        return None

    def close(self):
        """Stop the evaluator this env started (its Ray actors and their workers); one passed in is left alone."""
        if self._owns_evaluator and self._evaluator is not None:
            self._evaluator.close()
            self._evaluator = None
            self._owns_evaluator = False
        super().close()


def make_kernelbench_env(**kwargs) -> KernelEnv:
    return KernelEnv(set_name="kernelbench", **kwargs)


def make_dlrm_env(**kwargs) -> KernelEnv:
    return KernelEnv(set_name="dlrm", **kwargs)


def register_envs() -> None:
    """Register ``kbenv/KernelBench-v4`` and ``kbenv/DLRMBench-v4`` (v0 to v3 are left unregistered, so that
    ``gymnasium.make`` of any of them raises ``DeprecatedEnv`` naming v4)."""
    if ENV_IDS["kernelbench"] not in gym.registry:
        gym.register(id=ENV_IDS["kernelbench"], entry_point="kbenv.env:make_kernelbench_env",
                     disable_env_checker=True)
        gym.register(id=ENV_IDS["dlrm"], entry_point="kbenv.env:make_dlrm_env", disable_env_checker=True)

"""Batch scoring and a vector env, backed by the same Ray evaluators as the single env.

- :func:`score`: ``score(completions, problems) -> list[(reward, result)]`` for trainers that produce a batch
  of completions and want rewards (GRPO-style).
- :func:`trl_reward_func`: a function in the shape TRL's ``GRPOTrainer(reward_funcs=[...])`` calls:
  ``f(prompts, completions, **dataset_columns) -> list[float]``; the dataset needs a ``problem_id`` column.
- :class:`KernelVectorEnv`: a ``gymnasium.vector.VectorEnv`` of :class:`~kbenv.env.KernelEnv` copies whose
  steps are evaluated concurrently on the pool (one evaluation per GPU at a time), with next-step autoreset.
"""

from __future__ import annotations

import numpy as np
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import batch_space

from kbenv.env import KernelEnv
from kbenv.problems import get_problem
from kbenv.prompts import extract_code
from kbenv.sandbox.result import EvalRequest, EvalResult

_POOL = None


def default_pool(device: str = "auto", address: str | None = None):
    global _POOL
    if _POOL is None:
        from kbenv.sandbox.actor import EvaluatorPool
        _POOL = EvaluatorPool(device=device, address=address)
    return _POOL


def _completion_text(c) -> str:
    # TRL passes either strings or chat-format lists of {"role", "content"} messages.
    if isinstance(c, str):
        return c
    if isinstance(c, list) and c and isinstance(c[-1], dict):
        return str(c[-1].get("content", ""))
    return str(c)


def score(completions, problems, *, pool=None, size: str = "auto", precision: str | None = None,
          reward_fn: str = "amdahl", profile: str | None = None) -> list[tuple[float, EvalResult]]:
    """Evaluate a batch of completions (reply texts) against problems (ids), concurrently on the pool."""
    if len(completions) != len(problems):
        raise ValueError("completions and problems must have the same length")
    pool = pool or default_pool()
    dev = pool.device if isinstance(pool.device, str) else pool.device.type
    size = ("full" if dev.startswith("cuda") else "small") if size == "auto" else size
    out: list = [None] * len(completions)
    reqs, where = [], []
    for i, (c, pid) in enumerate(zip(completions, problems)):
        text = _completion_text(c)
        code = extract_code(text)
        prob = get_problem(pid)
        if code is None:
            r = EvalResult.format_failure(EvalRequest(problem=pid, candidate=text, size=size, reward_fn=reward_fn),
                                          prob, precision or prob.precision_default, dev,
                                          "no ```python block defining class ModelNew was found")
            out[i] = (r.reward, r)
            continue
        reqs.append(EvalRequest(problem=pid, candidate=code, size=size, precision=precision, reward_fn=reward_fn,
                                profile=profile))
        where.append(i)
    for j, res in pool.map(reqs):
        out[where[j]] = (res.reward, res)
    return out


def trl_reward_func(pool=None, problem_column: str = "problem_id", **score_kwargs):
    """A reward function for TRL's GRPO trainer: ``reward_funcs=[trl_reward_func()]``."""

    def kbenv_reward(prompts=None, completions=None, **kwargs) -> list[float]:
        problems = kwargs.get(problem_column)
        if problems is None:
            raise KeyError(f"the dataset needs a {problem_column!r} column naming each prompt's problem")
        return [r for r, _ in score(completions, problems, pool=pool, **score_kwargs)]

    kbenv_reward.__name__ = "kbenv_reward"
    return kbenv_reward


class KernelVectorEnv(VectorEnv):
    """``num_envs`` kernel episodes stepped together; their evaluations run concurrently on the pool."""

    def __init__(self, num_envs: int, pool=None, **env_kwargs):
        self.pool = pool or default_pool(env_kwargs.pop("device", "auto"), env_kwargs.pop("address", None))
        self.envs = [KernelEnv(evaluator=self.pool, **env_kwargs) for _ in range(num_envs)]
        self.num_envs = num_envs
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._needs_reset = [True] * num_envs
        self.metadata = {"autoreset_mode": "NextStep"}

    def _stack(self, obs_list):
        return {k: np.array([o[k] for o in obs_list], dtype=object if k != "turn" else np.int64)
                for k in obs_list[0]}

    def reset(self, *, seed=None, options=None):
        seeds = [None] * self.num_envs if seed is None else \
            ([seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed))
        obs, infos = [], {}
        for i, env in enumerate(self.envs):
            o, info = env.reset(seed=seeds[i], options=options)
            obs.append(o)
        self._needs_reset = [False] * self.num_envs
        return self._stack(obs), {"problem": np.array([e._problem.id for e in self.envs], dtype=object)}

    def step(self, actions):
        obs = [None] * self.num_envs
        rewards = np.zeros(self.num_envs)
        terms = np.zeros(self.num_envs, dtype=bool)
        truncs = np.zeros(self.num_envs, dtype=bool)
        results: list = [None] * self.num_envs
        reqs, where = [], []
        for i, (env, a) in enumerate(zip(self.envs, actions)):
            if self._needs_reset[i]:
                obs[i], _ = env.reset()
                self._needs_reset[i] = False
                continue
            req, code = env.make_request(a)
            if req is None:
                o, r, te, tr, info = env.step(a)  # format failure: no evaluation needed
                obs[i], rewards[i], terms[i], truncs[i], results[i] = o, r, te, tr, info["result"]
            else:
                reqs.append(req)
                where.append((i, code))
        for j, res in self.pool.map(reqs):
            i, code = where[j]
            o, r, te, tr, info = self.envs[i].finish_step(res, code)
            obs[i], rewards[i], terms[i], truncs[i], results[i] = o, r, te, tr, info["result"]
        for i in range(self.num_envs):
            if terms[i] or truncs[i]:
                self._needs_reset[i] = True
        return self._stack(obs), rewards, terms, truncs, {"result": np.array(results, dtype=object)}

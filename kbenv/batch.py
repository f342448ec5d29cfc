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

from kbenv import step as _step
from kbenv.env import KernelEnv
from kbenv.sandbox.result import EvalResult

_POOL = None


def default_pool(device: str = "auto", address: str | None = None):
    """The process-wide pool :func:`score` and :class:`KernelVectorEnv` use when given none (started once)."""
    global _POOL
    if _POOL is None:
        from kbenv.sandbox.actor import EvaluatorPool
        _POOL = EvaluatorPool(device=device, address=address)
    return _POOL


def score(completions, problems, *, pool=None, size: str = "auto", precision: str | None = None,
          reward_fn: str = "amdahl", profile: str | None = None) -> list[tuple[float, EvalResult]]:
    """Evaluate a batch of completions against problems, concurrently on the pool.

    Args:
        completions: reply texts, or chat-format message lists (the last message's content is the reply).
        problems: one problem id per completion.
        pool: an evaluator pool (default: :func:`default_pool`).
        size, precision, reward_fn, profile: as for :class:`~kbenv.env.KernelEnv`.

    Returns:
        ``[(reward, result), ...]`` in the order of ``completions``.
    """
    if len(completions) != len(problems):
        raise ValueError("completions and problems must have the same length")
    pool = pool or default_pool()
    size = _step.resolve_size(size, pool)
    prepared = [_step.prepare(c, pid, size=size, device=pool, precision=precision, reward_fn=reward_fn,
                              profile=profile) for c, pid in zip(completions, problems)]
    out: list = [None] * len(prepared)
    for i, res in _step.evaluate(prepared, pool):
        out[i] = (res.reward, res)
    return out


def trl_reward_func(pool=None, problem_column: str = "problem_id", on_results=None, **score_kwargs):
    """A reward function for TRL's GRPO trainer: ``GRPOTrainer(reward_funcs=[trl_reward_func()])``.

    TRL calls it as ``f(prompts=..., completions=..., **dataset_columns)``; the dataset needs a
    ``problem_column`` column naming each prompt's problem. ``on_results(results)``, if given, receives the
    :class:`EvalResult` list of each batch (to log or keep them); ``score_kwargs`` go to :func:`score`.
    """

    def kbenv_reward(prompts=None, completions=None, **kwargs) -> list[float]:
        problems = kwargs.get(problem_column)
        if problems is None:
            raise KeyError(f"the dataset needs a {problem_column!r} column naming each prompt's problem")
        scored = score(completions, problems, pool=pool, **score_kwargs)
        if on_results is not None:
            on_results([r for _, r in scored])
        return [r for r, _ in scored]

    kbenv_reward.__name__ = "kbenv_reward"
    return kbenv_reward


class KernelVectorEnv(VectorEnv):
    """``num_envs`` kernel episodes stepped together; their evaluations run concurrently on the pool.

    Autoreset is ``NextStep``: the step after an episode ends resets that sub-env (its action is ignored). Info
    from :meth:`step` is ``{"result": array of result dicts}`` (None where a sub-env was reset).
    """

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
        out = {}
        for k in obs_list[0]:
            if k == "turn":
                out[k] = np.array([o[k] for o in obs_list], dtype=np.int64)
            else:
                arr = np.empty(len(obs_list), dtype=object)  # element-wise: tuples must not become a 2-D array
                for i, o in enumerate(obs_list):
                    arr[i] = o[k]
                out[k] = arr
        return out

    def reset(self, *, seed=None, options=None):
        seeds = [None] * self.num_envs if seed is None else \
            ([seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed))
        obs = []
        for i, env in enumerate(self.envs):
            o, _ = env.reset(seed=seeds[i], options=options)
            obs.append(o)
        self._needs_reset = [False] * self.num_envs
        return self._stack(obs), {"problem": np.array([e._problem.id for e in self.envs], dtype=object)}

    def step(self, actions):
        obs = [None] * self.num_envs
        rewards = np.zeros(self.num_envs)
        terms = np.zeros(self.num_envs, dtype=bool)
        truncs = np.zeros(self.num_envs, dtype=bool)
        results: list = [None] * self.num_envs
        prepared, where = [], []
        for i, (env, a) in enumerate(zip(self.envs, actions)):
            if self._needs_reset[i]:
                obs[i], _ = env.reset()
                self._needs_reset[i] = False
                continue
            prepared.append(env.prepare(a))
            where.append(i)
        for j, res in _step.evaluate(prepared, self.pool):
            i = where[j]
            o, r, te, tr, info = self.envs[i].advance(prepared[j], res)
            obs[i], rewards[i], terms[i], truncs[i], results[i] = o, r, te, tr, info["result"]
            self._needs_reset[i] = bool(te or tr)
        return self._stack(obs), rewards, terms, truncs, {"result": np.array(results, dtype=object)}

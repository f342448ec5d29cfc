"""kbenv: a reinforcement-learning reward environment for agents that write GPU kernels.

Public API:

- environments ``kbenv/KernelBench-v4`` and ``kbenv/DLRMBench-v4`` (``gymnasium.make``), :class:`KernelEnv`,
  :class:`KernelVectorEnv`;
- batch scoring for trainers that do not step an env: :func:`score`, :func:`trl_reward_func`;
- problems: :func:`list_problems`, :func:`get_problem`;
- evaluation: :class:`EvalRequest`, :class:`EvalResult`, :class:`EvaluatorPool` (Ray actors, one per GPU);
- errors: :class:`UsageError` (a ``ValueError``), :class:`PolicyFailed`, :class:`MemoryPlanError` (a ``ValueError``
  naming the size that fits), all but the last under :class:`KbenvError`;
- trainers: :func:`kbenv.verifiers_env.load_environment` (needs ``verifiers``).
"""

import os as _os

__version__ = "0.1.0"

# A sandboxed process (an executor, a builder: ``kbenv.sandbox.process.sandbox_env`` sets KBENV_SANDBOXED) imports
# kbenv's wire, lent-memory and problem modules only: the public API and the environment registry (gymnasium) are
# left out of it, 0.13-0.16 s of each executor's start-up on the CPU machine (about a tenth of its torch import).
if _os.environ.get("KBENV_SANDBOXED") != "1":
    from kbenv.env import KernelEnv, register_envs
    from kbenv.errors import KbenvError, PolicyFailed, UsageError
    from kbenv.problems import get_problem, list_problems
    from kbenv.sandbox.result import EvalRequest, EvalResult

    register_envs()


def __getattr__(name):
    # Ray-backed parts are imported on first use so that `import kbenv` stays light.
    if name == "EvaluatorPool":
        from kbenv.sandbox.actor import EvaluatorPool
        return EvaluatorPool
    if name == "MemoryPlanError":
        from kbenv.step import MemoryPlanError
        return MemoryPlanError
    if name in ("score", "trl_reward_func", "KernelVectorEnv"):
        from kbenv import batch
        return getattr(batch, name)
    raise AttributeError(name)


__all__ = ["KernelEnv", "EvalRequest", "EvalResult", "EvaluatorPool", "score", "trl_reward_func",
           "KernelVectorEnv", "list_problems", "get_problem", "KbenvError", "UsageError", "PolicyFailed",
           "MemoryPlanError", "__version__"]

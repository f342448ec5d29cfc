"""kbenv as a `verifiers <https://github.com/PrimeIntellect-ai/verifiers>`_ environment (the v1 API).

:func:`load_environment` returns a verifiers ``Env`` whose tasks are kbenv problems (the same prompts as
:class:`~kbenv.env.KernelEnv`) and whose reward is kbenv's: every model reply is scored through
:func:`kbenv.score`, on the same evaluator pool and verifier as the Gymnasium env.

- ``max_turns=1`` (default): one reply per task, scored (a single-turn environment).
- ``max_turns=N``: a multi-turn environment. Each reply is evaluated; its feedback (verdict, failed checks with
  their figures, error tail, timings) comes back as the next user message, and the chat history grows, as in
  verifiers' multi-turn games, until a reply passes or ``N`` replies were made. The reward is the last reply's.

The model runs in-process (:class:`KernelChatHarness`: one chat-completions call per turn through verifiers'
interception endpoint, no program to install), so a rollout needs no container, no ``uv`` and no network
beyond the model server. Per-turn results are kept on the trace's ``info["kbenv"]``.

Verifiers finds tasksets and harnesses by installed package name; this module registers itself under the id
``kbenv`` (``verifiers.v1.tasksets.kbenv``, ``verifiers.v1.harnesses.kbenv``) when imported.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import verifiers.v1 as vf
from verifiers.v1.runtimes import ProgramResult

from kbenv import step as _step
from kbenv.env import format_feedback, sanitize
from kbenv.problems import get_problem, list_problems
from kbenv.prompts import followup_prompt, problem_prompt, system_prompt

__all__ = ["KernelTaskset", "KernelTasksetConfig", "KernelTask", "KernelChatHarness", "KernelVerifiersEnv",
           "KernelVerifiersEnvConfig", "load_environment", "set_pool"]

TASKSET_ID = "kbenv"

_POOL = None


def set_pool(pool) -> None:
    """The evaluator pool rewards are computed on (default: :func:`kbenv.batch.default_pool`)."""
    global _POOL
    _POOL = pool


def _pool():
    if _POOL is None:
        from kbenv.batch import default_pool
        return default_pool()
    return _POOL


class KernelTasksetConfig(vf.TasksetConfig):
    """Which kbenv problems become tasks, and how candidates are evaluated."""

    problems: list[str] | None = None
    """problem ids (None: every problem of ``set_name``)"""
    set_name: str = "kernelbench"
    """kernelbench or dlrm"""
    backend: str = "triton"
    """triton or cuda (what the prompt asks for)"""
    size: str = "auto"
    """size tier (auto: full on cuda, small on the CPU)"""
    precision: str | None = None
    """fp32 or bf16 (None: each problem's default)"""
    reward_fn: str = "amdahl"
    """amdahl, speedup or fast_p"""


class KernelData(vf.TaskData):
    problem_id: str
    """the kbenv problem id"""


class KernelTask(vf.Task[KernelData, vf.State, vf.TaskConfig]):
    """One kbenv problem. Scoring reads the rewards the env recorded for each reply."""


class KernelTaskset(vf.Taskset[KernelTask, KernelTasksetConfig]):
    """kbenv problems as verifiers tasks: the turn-0 prompt of :class:`~kbenv.env.KernelEnv` for each problem."""

    def load(self) -> Iterator[KernelTask]:
        ids = self.config.problems or [p.id for p in list_problems(self.config.set_name)]
        device = _step.resolve_device("auto")
        for pid in ids:
            p = get_problem(pid)
            prec = self.config.precision or p.precision_default
            yield KernelTask(KernelData(id=pid, name=pid, problem_id=pid,
                                        prompt=sanitize(problem_prompt(p.source, self.config.backend, None, prec,
                                                                       device)),
                                        system_prompt=system_prompt(self.config.backend)), self.config.task)


class KernelChatHarnessConfig(vf.HarnessConfig):
    max_tokens: int = 4096
    """most tokens in one reply"""


class KernelChatHarness(vf.Harness[KernelChatHarnessConfig]):
    """A tool-less chat turn run in-process: the conversation so far goes to the model through verifiers'
    interception endpoint; the reply lands on the trace. No program, runtime install or container."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def setup(self, runtime) -> None:
        return None

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, tool_interception_url=None):
        system, prompt = self.resolve_prompt(data)
        messages = [{"role": "system", "content": system}] if system else []
        messages += [{"role": "user", "content": prompt}] if isinstance(prompt, str) else \
            [m if isinstance(m, dict) else m.model_dump(exclude_none=True) for m in (prompt or [])]
        return await self._chat(ctx, endpoint, secret, messages)

    async def _chat(self, ctx, endpoint, secret, messages) -> ProgramResult:
        import httpx
        body = {"model": ctx.model, "messages": messages, "max_tokens": self.config.max_tokens}
        async with httpx.AsyncClient(timeout=None) as client:
            r = await client.post(endpoint.rstrip("/") + "/chat/completions", json=body,
                                  headers={"Authorization": f"Bearer {secret}"})
        if r.status_code != 200:
            return ProgramResult(exit_code=1, stdout="", stderr=f"HTTP {r.status_code}: {r.text[:500]}")
        return ProgramResult(exit_code=0, stdout=r.json()["choices"][0]["message"].get("content") or "", stderr="")


class KernelVerifiersEnvConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig()
    """the policy under evaluation or training"""
    max_turns: int = 1
    """replies per task: 1 is single-turn; more feed each evaluation back as the next user message"""


class KernelVerifiersEnv(vf.Env[KernelVerifiersEnvConfig]):
    """Each reply is scored by kbenv; with ``max_turns > 1`` its feedback is the next user turn."""

    async def run(self, task, agents) -> None:
        import asyncio

        cfg = self.taskset.config
        pool = _pool()
        results = []
        async with agents.agent.interaction(task) as interaction:
            segment = await interaction.turn()
            for turn in range(self.config.max_turns):
                if segment.terminated:
                    break
                reply = segment.last_reply
                (reward, result), = await asyncio.to_thread(
                    _score_one, reply, task.data.problem_id, pool, cfg)
                results.append(result.to_dict())
                if result.verdict == "pass" or turn + 1 >= self.config.max_turns:
                    break
                segment = await interaction.turn(followup_prompt(format_feedback(result)))
        trace = interaction.trace
        last = results[-1] if results else None
        trace.record_reward("kbenv_reward", float(last["reward"]) if last else 0.0, 1.0)
        trace.info["kbenv"] = [{k: r[k] for k in ("verdict", "category", "reason", "reward", "speedup")}
                               for r in results]


def _score_one(reply, problem_id, pool, cfg):
    from kbenv.batch import score
    return score([reply], [problem_id], pool=pool, size=cfg.size, precision=cfg.precision, reward_fn=cfg.reward_fn)


def _register() -> None:
    """Expose the taskset and harness under the id ``kbenv`` where verifiers' plugin loader looks."""
    for group, cls in (("verifiers.v1.tasksets", None), ("verifiers.v1.harnesses", KernelChatHarness)):
        name = f"{group}.{TASKSET_ID}"
        if name in sys.modules:
            continue
        mod = types.ModuleType(name, __doc__)
        if cls is None:
            mod.KernelTaskset, mod.KernelVerifiersEnv = KernelTaskset, KernelVerifiersEnv
            mod.__all__ = ["KernelTaskset", "KernelVerifiersEnv"]
        else:
            mod.KernelChatHarness, mod.KernelChatHarnessConfig = KernelChatHarness, KernelChatHarnessConfig
            mod.__all__ = ["KernelChatHarness"]
        mod.__spec__ = __spec__
        sys.modules[name] = mod


_register()


def load_environment(problems: list[str] | None = None, *, set_name: str = "kernelbench", max_turns: int = 1,
                     size: str = "auto", precision: str | None = None, reward_fn: str = "amdahl",
                     backend: str = "triton", pool=None, runtime=None) -> KernelVerifiersEnv:
    """A verifiers environment over kbenv problems whose reward is kbenv's.

    Args:
        problems: problem ids (None: the whole ``set_name``).
        max_turns: replies per task (1: single-turn; more: feedback turns with a growing chat).
        size, precision, reward_fn, backend: as for :class:`~kbenv.env.KernelEnv`.
        pool: the evaluator pool (default: :func:`kbenv.batch.default_pool`, started on the first reward).
        runtime: a verifiers runtime config for the agent (default: a local subprocess runtime; the harness
            runs in-process and executes nothing in it).
    """
    if pool is not None:
        set_pool(pool)
    taskset = KernelTasksetConfig(id=TASKSET_ID, problems=problems, set_name=set_name, size=size,
                                  precision=precision, reward_fn=reward_fn, backend=backend)
    agent = vf.AgentConfig(harness=KernelChatHarnessConfig(id=TASKSET_ID),
                           runtime=runtime or vf.SubprocessConfig())
    return KernelVerifiersEnv(KernelVerifiersEnvConfig(taskset=taskset, agent=agent, max_turns=max_turns))

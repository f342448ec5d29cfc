"""Ray-parallel rollouts: many episodes in flight, evaluations fanned out over one evaluator per GPU.

Each (problem, episode, sample) is one multi-turn episode of :class:`~kbenv.env.KernelEnv`. Every turn, the
observations of all live episodes go to the policy in one ``act_batch`` call, the replies are evaluated
concurrently on the :class:`~kbenv.sandbox.actor.EvaluatorPool`, and every evaluation is appended to the run's
record log as soon as it finishes (crash-safe), with the turn's texts (chat sent, reply, candidate). A resumed
run skips the episodes :func:`kbenv.records.completed_keys` reports finished; an episode cut off mid-way is
played again from its first turn.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import time
import uuid
from pathlib import Path

from kbenv import step as _step
from kbenv.config import parse_limits, timing_overrides
from kbenv.env import KernelEnv
from kbenv.errors import PolicyFailed, UsageError
from kbenv.problems import get_problem, list_problems
from kbenv.records import RecordWriter, completed_keys, make_record, write_metadata

#: What identifies an episode in a run's records (resume skips the finished ones).
EPISODE_KEY = ("problem", "episode", "sample")

POLICY_ALIASES = {
    "known-good": "kbenv.agents.scripted:KnownGoodPolicy",
    "known-bad": "kbenv.agents.scripted:KnownBadPolicy",
    "openai": "kbenv.agents.openai_chat:OpenAIChatPolicy",
    "hf": "kbenv.agents.hf_local:TransformersPolicy",
}


@dataclasses.dataclass
class RolloutConfig:
    """Arguments of ``kbenv rollout``."""

    policy: str = "known-good"
    """policy as ``module:Class`` or an alias (known-good, known-bad, openai, hf)"""
    policy_kwargs: str = "{}"
    """JSON object of keyword arguments for the policy's constructor"""
    problems: str = "policy"
    """problem ids (comma-separated), a set name (kernelbench, dlrm), or 'policy' for the policy's own list"""
    episodes: int = 1
    """episodes per problem"""
    turns: int = 3
    """turns per episode (multi-turn feedback)"""
    gpus: int = 0
    """GPUs to use (0 = every GPU of the cluster, or one CPU evaluator without a GPU); see also --evaluators"""
    evaluators: int = 0
    """number of evaluators (Ray actors) to start; overrides --gpus when set (0 = as --gpus says)"""
    lanes: int = 1
    """evaluators sharing each GPU (cuda; README "Throughput"): compile and correctness overlap, timing alone"""
    limit: list = dataclasses.field(default_factory=list)
    """a phase deadline PHASE=SECONDS for the sandbox, repeatable (PHASE: compile, trial, timing)"""
    timing_budget: float = 0.0
    """paired timing per evaluation (s), unless settled sooner (0: default, 3 s on cuda); less is faster, noisier"""
    chat: str = "resend"
    """resend (each turn one self-contained prompt) or history (the chat grows turn by turn)"""
    device: str = "auto"
    """auto, cuda or cpu"""
    size: str = "auto"
    """small, medium, full, auto (full on cuda, small on cpu) or largest (per problem, the largest size whose
    memory plan fits the device: on an H200, medium for the 2 problems whose full size does not fit)"""
    precision: str = ""
    """fp32 or bf16 ('' = each problem's default)"""
    backend: str = "triton"
    """triton or cuda (prompt)"""
    reward: str = "amdahl"
    """reward function: amdahl, speedup or fast_p"""
    profile: str = ""
    """workload profile weighting the amdahl reward ('' = the set's default)"""
    out: str = ""
    """run directory (default runs/<time>-<policy>)"""
    resume: bool = False
    """continue a run in --out, skipping finished episodes"""
    address: str = ""
    """Ray cluster address ('' = start a local cluster)"""
    progress: bool = True
    """show a progress bar"""
    spares: int = 0
    """clean executors kept ready per evaluator (0: the sandbox's default, 2 on cuda and 1 on the CPU)"""


def resolve_policy(spec: str, kwargs: dict | str):
    """Build a policy from ``module:Class`` (or an alias) and its keyword arguments (a dict or a JSON object).

    Raises:
        UsageError: an unknown policy, keyword arguments that are not a JSON object, or arguments the policy's
            constructor refuses (naming ``--policy`` or ``--policy-kwargs``).
    """
    if isinstance(kwargs, str):
        try:
            kwargs = json.loads(kwargs or "{}")
        except json.JSONDecodeError as e:
            raise UsageError("--policy-kwargs", f"not valid JSON ({e.msg} at character {e.pos})") from None
    if not isinstance(kwargs, dict):
        raise UsageError("--policy-kwargs", f"must be a JSON object, got {type(kwargs).__name__}")
    target = POLICY_ALIASES.get(spec, spec)
    if ":" not in target:
        raise UsageError("--policy", f"must be 'module:Class' or one of {sorted(POLICY_ALIASES)}, got {spec!r}")
    mod, cls = target.split(":", 1)
    try:
        factory = getattr(importlib.import_module(mod), cls)
    except (ImportError, AttributeError) as e:
        raise UsageError("--policy", f"cannot load {target!r}: {e}") from None
    try:
        return factory(**kwargs)
    except TypeError as e:
        raise UsageError("--policy-kwargs", f"{spec}: {e}") from None


def _problem_list(cfg: RolloutConfig, policy) -> list[str]:
    if cfg.problems == "policy":
        if not hasattr(policy, "problems"):
            raise UsageError("--problems", "this policy has no problem list of its own; pass problem ids or a set")
        return list(policy.problems())
    if cfg.problems in ("kernelbench", "dlrm"):
        return [p.id for p in list_problems(cfg.problems)]
    ids = [p.strip() for p in cfg.problems.split(",") if p.strip()]
    for pid in ids:
        try:
            get_problem(pid)
        except KeyError:
            raise UsageError("--problems", f"unknown problem {pid!r} (see kbenv problems list)") from None
    return ids


def run_rollout(cfg: RolloutConfig, pool=None, policy=None) -> Path:
    """Run (or resume) a rollout and return its run directory.

    A pool passed in is left running; one started here is closed at the end. A policy that raises
    (:class:`~kbenv.errors.PolicyFailed`, from the policy's exception) and a harness fault stop the run (the
    records so far are kept).
    """
    policy = policy or resolve_policy(cfg.policy, cfg.policy_kwargs)
    problems = _problem_list(cfg, policy)
    limits = parse_limits(cfg.limit)
    timing = timing_overrides(cfg.timing_budget)
    if cfg.chat not in ("resend", "history"):
        raise UsageError("--chat", f"must be resend or history, got {cfg.chat!r}")
    run_dir = Path(cfg.out or f"runs/{time.strftime('%Y%m%d-%H%M%S')}-{cfg.policy.replace(':', '.').replace('/', '_')}")
    if not cfg.resume and (run_dir / "records.msgpack").exists():
        raise FileExistsError(f"--out {run_dir}: already holds records; pass --resume to continue it")
    own_pool = pool is None
    if own_pool:
        from kbenv.sandbox.actor import EvaluatorPool
        config = {}
        if cfg.spares > 0:
            config["spares"] = cfg.spares
        if limits:
            config["limits"] = limits
        if timing:
            config["timing"] = timing
        device = _step.resolve_device(cfg.device)
        if cfg.lanes > 1:
            from kbenv.sandbox import memplan
            memplan.set_gpu_lanes(cfg.lanes)  # the sizes below are planned with each lane's share
        if cfg.size != "largest":  # "largest" picks a size that fits per problem (in _run)
            _step.preflight(problems, _step.resolve_size(cfg.size, device), cfg.precision or None, device)
        pool = EvaluatorPool(n=cfg.evaluators or cfg.gpus or None, device=device, address=cfg.address or None,
                             config=config or None, lanes=cfg.lanes)
    try:
        return _run(cfg, pool, policy, problems, run_dir)
    finally:
        if own_pool:
            pool.close()


def _sizes(cfg: RolloutConfig, problems: list[str], device: str) -> dict[str, str]:
    """Each problem's size tier: ``cfg.size``, or with ``largest`` the largest one whose memory plan fits the
    device (a problem that fits at no size is refused with the plan's one-line message)."""
    if cfg.size != "largest":
        return {pid: cfg.size for pid in problems}
    out = {}
    for pid in problems:
        size = _step.largest_size(pid, cfg.precision or None, device)
        if size is None:
            _step.preflight([pid], "small", cfg.precision or None, device)  # raises MemoryPlanError, one line
        out[pid] = size
    return out


def _run(cfg: RolloutConfig, pool, policy, problems: list[str], run_dir: Path) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    meta = write_metadata(run_dir, {"config": dataclasses.asdict(cfg), "problems": problems,
                                    "evaluators": len(pool), "device": _step.device_type(pool)})
    run_id = meta.get("run_id") or uuid.uuid4().hex[:12]
    if "run_id" not in meta:
        write_metadata(run_dir, {"run_id": run_id})
    done = completed_keys(run_dir, EPISODE_KEY, done_field="episode_done") if cfg.resume else set()
    sizes = _sizes(cfg, problems, _step.device_type(pool))
    episodes = []
    for pid in problems:
        for ep in range(cfg.episodes):
            if (pid, ep, 0) in done:
                continue
            env = KernelEnv(problems=[pid], backend=cfg.backend, max_turns=cfg.turns, size=sizes[pid],
                            precision=cfg.precision or None, reward_fn=cfg.reward, profile=cfg.profile or None,
                            evaluator=pool, chat=cfg.chat)
            obs, _ = env.reset(seed=ep, options={"problem_id": pid})
            episodes.append({"env": env, "obs": obs, "problem": pid, "episode": ep})
    bar = None
    if cfg.progress:
        from tqdm import tqdm
        bar = tqdm(total=len(episodes) * cfg.turns, desc="rollout evaluations", unit="eval")
    if hasattr(policy, "reset"):
        policy.reset()
    t_start, n_evals = time.perf_counter(), 0
    try:
        with RecordWriter(run_dir) as writer:
            live = list(episodes)
            while live:
                try:
                    replies = policy.act_batch([e["obs"] for e in live])
                except Exception as exc:  # noqa: BLE001 - any policy failure stops the run; never a reward
                    raise PolicyFailed(f"--policy {cfg.policy}: {type(exc).__name__}: {exc}") from exc
                prepared = [e["env"].prepare(reply) for e, reply in zip(live, replies)]
                n_evals += sum(p.result is None for p in prepared)
                finished = []
                for j, res in _step.evaluate(prepared, pool):
                    e = live[j]
                    sent = e["obs"]
                    _advance(e, e["env"].advance(prepared[j], res), prepared[j], sent, writer, run_id, cfg,
                             finished, bar)
                live = [e for e in live if e not in finished]
    finally:
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - t_start
    write_metadata(run_dir, {"finished": True, "last_session": {
        "evaluations": n_evals, "wall_s": round(wall, 3), "evaluators": len(pool),
        "evaluations_per_min": round(60 * n_evals / wall, 2) if wall > 0 else None}})
    return run_dir


def _advance(e, step_out, prepared, sent_obs, writer, run_id, cfg, finished, bar):
    obs, reward, terminated, truncated, info = step_out
    texts = {"messages": [dict(m) for m in sent_obs["messages"]], "reply": prepared.reply,
             "candidate": prepared.code}
    rec = make_record(info["result"], run_id=run_id, policy=cfg.policy, episode=e["episode"], turn=info["turn"],
                      texts=texts)
    rec["episode_done"] = bool(terminated or truncated)
    writer.write(rec)
    if bar is not None:
        bar.update(1)
    e["obs"] = obs
    if terminated or truncated:
        finished.append(e)
        if bar is not None:
            bar.total -= cfg.turns - (info["turn"] + 1)
            bar.refresh()

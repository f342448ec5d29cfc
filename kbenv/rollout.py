"""Ray-parallel rollouts: many episodes in flight, evaluations fanned out over one evaluator per GPU.

Each (problem, episode, sample) is one multi-turn episode of :class:`~kbenv.env.KernelEnv`. Every turn, the
observations of all live episodes go to the policy in one ``act_batch`` call, the replies are evaluated
concurrently on the :class:`~kbenv.sandbox.actor.EvaluatorPool`, and every evaluation is appended to the run's
record log as soon as it finishes (crash-safe). A resumed run skips episodes whose last turn is recorded.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import time
import uuid
from pathlib import Path

from kbenv.env import KernelEnv
from kbenv.problems import list_problems
from kbenv.records import RecordWriter, make_record, read_records, write_metadata

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
    """evaluators: GPUs to use (0 = every GPU of the cluster, or one CPU evaluator without a GPU)"""
    device: str = "auto"
    """auto, cuda or cpu"""
    size: str = "auto"
    """small, full or auto (full on cuda, small on cpu)"""
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
    spares: int = 1
    """clean workers kept ready per evaluator (2 hides a worker's start-up when candidates come back to back)"""


def resolve_policy(spec: str, kwargs: dict):
    target = POLICY_ALIASES.get(spec, spec)
    if ":" not in target:
        raise ValueError(f"policy must be 'module:Class' or one of {sorted(POLICY_ALIASES)}, got {spec!r}")
    mod, cls = target.split(":", 1)
    return getattr(importlib.import_module(mod), cls)(**kwargs)


def _problem_list(cfg: RolloutConfig, policy) -> list[str]:
    if cfg.problems == "policy":
        if not hasattr(policy, "problems"):
            raise ValueError("this policy has no problem list of its own; pass --problems")
        return list(policy.problems())
    if cfg.problems in ("kernelbench", "dlrm"):
        return [p.id for p in list_problems(cfg.problems)]
    return [p.strip() for p in cfg.problems.split(",") if p.strip()]


def run_rollout(cfg: RolloutConfig, pool=None, policy=None) -> Path:
    """Run (or resume) a rollout and return its run directory."""
    policy = policy or resolve_policy(cfg.policy, json.loads(cfg.policy_kwargs or "{}"))
    problems = _problem_list(cfg, policy)
    run_dir = Path(cfg.out or f"runs/{time.strftime('%Y%m%d-%H%M%S')}-{cfg.policy.replace(':', '.').replace('/', '_')}")
    run_dir.mkdir(parents=True, exist_ok=True)
    if not cfg.resume and (run_dir / "records.msgpack").exists():
        raise FileExistsError(f"{run_dir} already holds records; pass --resume to continue it")
    if pool is None:
        from kbenv.sandbox.actor import EvaluatorPool
        pool = EvaluatorPool(n=cfg.gpus or None, device=cfg.device, address=cfg.address or None,
                             config={"spares": cfg.spares} if cfg.spares != 1 else None)
    meta = write_metadata(run_dir, {"config": dataclasses.asdict(cfg), "problems": problems,
                                    "evaluators": len(pool), "device": pool.device})
    run_id = meta.get("run_id") or uuid.uuid4().hex[:12]
    if "run_id" not in meta:
        write_metadata(run_dir, {"run_id": run_id})
    done = set()
    if cfg.resume:
        for r in read_records(run_dir):
            if r.get("episode_done"):
                done.add((r["problem"], r["episode"], r.get("sample", 0)))
    episodes = []
    for pid in problems:
        for ep in range(cfg.episodes):
            if (pid, ep, 0) in done:
                continue
            env = KernelEnv(problems=[pid], backend=cfg.backend, max_turns=cfg.turns, size=cfg.size,
                            precision=cfg.precision or None, reward_fn=cfg.reward, profile=cfg.profile or None,
                            evaluator=pool)
            obs, _ = env.reset(seed=ep, options={"problem": pid})
            episodes.append({"env": env, "obs": obs, "problem": pid, "episode": ep})
    bar = None
    if cfg.progress:
        from tqdm import tqdm
        bar = tqdm(total=len(episodes) * cfg.turns, desc="evaluations", unit="eval")
    if hasattr(policy, "reset"):
        policy.reset()
    t_start, n_evals = time.perf_counter(), 0
    with RecordWriter(run_dir) as writer:
        live = list(episodes)
        while live:
            replies = policy.act_batch([e["obs"] for e in live])
            reqs, owners = [], []
            finished = []
            for e, reply in zip(live, replies):
                req, code = e["env"].make_request(reply)
                if req is None:
                    _advance(e, e["env"].step(reply), writer, run_id, cfg, finished, bar)
                else:
                    reqs.append(req)
                    owners.append((e, code))
            n_evals += len(reqs)
            for j, res in pool.map(reqs):
                e, code = owners[j]
                _advance(e, e["env"].finish_step(res, code), writer, run_id, cfg, finished, bar)
            live = [e for e in live if e not in finished]
    if bar is not None:
        bar.close()
    wall = time.perf_counter() - t_start
    write_metadata(run_dir, {"finished": True, "last_session": {
        "evaluations": n_evals, "wall_s": round(wall, 3), "evaluators": len(pool),
        "evaluations_per_min": round(60 * n_evals / wall, 2) if wall > 0 else None}})
    return run_dir


def _advance(e, step_out, writer, run_id, cfg, finished, bar):
    obs, reward, terminated, truncated, info = step_out
    rec = make_record(info["result"], run_id=run_id, policy=cfg.policy, episode=e["episode"], turn=info["turn"])
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

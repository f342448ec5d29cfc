"""Ray actors: one trusted evaluator per GPU (or per CPU slot), and a pool that fans requests out to them.

A local Ray cluster is started on demand; ``address=...`` (or ``RAY_ADDRESS``) connects to an existing one,
where the same code places one actor per GPU across the cluster's nodes. No scheduler of our own: Ray places
GPU actors by their ``num_gpus=1`` request and CPU actors with its ``SPREAD`` strategy (across the nodes), and
the pool hands each actor at most one evaluation at a time (``ray.wait`` on the in-flight ones), so no two
evaluations ever share a GPU. Every result says where it was produced: ``facts["node_id"]`` (the Ray node),
``facts["host"]`` and ``facts["gpu"]`` (index on its node, name, UUID; None on a CPU evaluator).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Iterable, Iterator

import ray

from kbenv.sandbox.result import EvalRequest, EvalResult


def ensure_ray(address: str | None = None, num_cpus: int | None = None, num_gpus: int | None = None) -> None:
    """Connect to ``address`` (or ``RAY_ADDRESS``), or start a local cluster if none is running."""
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_SCHEDULER_EVENTS", "0")
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
        return
    kwargs = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
                  object_store_memory=256 * 1024 * 1024)
    if num_cpus is not None:
        kwargs["num_cpus"] = num_cpus
    if num_gpus is not None:
        kwargs["num_gpus"] = num_gpus
    ray.init(**kwargs)


@ray.remote(max_restarts=-1, max_task_retries=0, concurrency_groups={"build": 1})
class Evaluator:
    """The trusted supervisor of one device, as a Ray actor.

    It keeps per-problem state across candidates (reference model, cached inputs and outputs, baselines), and
    a spare clean worker process. If the actor itself dies (a harness fault), Ray restarts it and the caller
    sees a ``RayActorError`` for that evaluation: it is raised, never scored.
    """

    def __init__(self, device: str = "cpu", config: dict | None = None):
        import torch

        if device == "cuda":
            # Ray sets CUDA_VISIBLE_DEVICES to this actor's GPU: it is device 0 here.
            device = "cuda:0"
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise RuntimeError("an evaluator for cuda was placed on a node without a visible GPU")
        from kbenv.sandbox.supervisor import Supervisor

        self.device = device
        self.placement = _placement(device)
        self.sup = Supervisor(device=device, **(config or {}))

    def evaluate(self, request: dict) -> dict:
        res = self.sup.evaluate(EvalRequest.from_dict(request))
        # Where it ran, for the records: the Ray node and the GPU (None on a CPU evaluator).
        res.facts.update(self.placement)
        if res.gpu is None and self.placement["gpu"]:
            res.gpu = self.placement["gpu"]["name"]
        return res.to_dict()

    @ray.method(concurrency_group="build")
    def prebuild(self, sources: list[str]) -> int:
        """Start building these candidates' C++/CUDA extensions now, while earlier evaluations run
        (``Supervisor.prebuild``; it returns at once)."""
        return self.sup.prebuild(sources)

    @ray.method(concurrency_group="build")
    def build_states(self, sources: list[str]) -> list[str]:
        """Each source's ahead-of-time build here: ``none``, ``building`` or ``done`` (``BuildFarm.state``)."""
        return self.sup.build_states(sources)

    def info(self) -> dict:
        gpu = self.placement["gpu"]
        return {"device": self.device, "gpu": gpu["name"] if gpu else None, "gpu_info": gpu,
                "node_id": self.placement["node_id"], "host": self.placement["host"],
                "sandbox": self.sup.sandbox, "pid": os.getpid()}

    def warm(self, problem: str, size: str, precision: str | None = None) -> None:
        """Build a problem's reference ahead of its first candidate (``Supervisor.warm``)."""
        from kbenv.problems import get_problem
        p = get_problem(problem)
        self.sup.warm(p, size, precision or p.precision_default)

    def close(self) -> None:
        self.sup.close()


def _placement(device: str) -> dict:
    """This actor's Ray node id, host name and GPU (index on its node as Ray assigned it, name, UUID)."""
    import socket

    ctx = ray.get_runtime_context()
    gpu = None
    if device.startswith("cuda"):
        import torch
        props = torch.cuda.get_device_properties(0)
        ids = ray.get_gpu_ids()
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            uuid = str(uuid)
            uuid = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
        index = ids[0] if ids else None
        if isinstance(index, str) and index.isdigit():
            index = int(index)
        gpu = {"index": index, "name": props.name, "uuid": uuid}
    return {"node_id": ctx.get_node_id(), "host": socket.gethostname(), "gpu": gpu}


def pick_next(candidates: list[str], mine: list[int], states: list[str]) -> int:
    """The index in ``candidates`` (pending sources, in order) an idle evaluator runs next; ``mine``: the indices
    whose extensions it builds ahead, ``states``: their builds' states (``BuildFarm.state``). The first of its own
    whose build has finished, else the first that needs no build, else the first of its own (its build still
    running: the compile phase waits for it), else the first one: the GPU waits for a build only when every
    request it could run would."""
    from kbenv.sandbox.builds import needs_build
    ready = [j for j, st in zip(mine, states) if st != "building"]
    if ready:
        return ready[0]
    free = next((j for j, src in enumerate(candidates) if not needs_build(src)), None)
    if free is not None:
        return free
    return mine[0] if mine else 0


def detect_device() -> str:
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


class EvaluatorPool:
    """One :class:`Evaluator` per GPU (``device="cuda"``) or ``n`` CPU evaluators (``device="cpu"``).

    Args:
        n: number of evaluators; default = the cluster's GPUs (cuda) or 1 (cpu). CPU evaluators are placed
            with Ray's ``SPREAD`` strategy, across the cluster's nodes.
        device: ``cuda``, ``cpu`` or ``auto`` (cuda when this machine sees a GPU).
        address: an existing Ray cluster to connect to; otherwise a local one is started.
        config: keyword arguments for each :class:`~kbenv.sandbox.supervisor.Supervisor`.
        lanes: evaluators per GPU (:mod:`kbenv.sandbox.lanes`; default 1). With more, ``n`` counts GPUs and each
            GPU gets ``lanes`` evaluators (Ray's fractional ``num_gpus=1/lanes``), each planning with its share of
            the GPU's memory: their candidates' compile, correctness and decoy work overlap, every timing phase
            runs alone on the GPU, and a verdict the sharing could have caused is judged again alone.
    """

    def __init__(self, n: int | None = None, device: str = "auto", address: str | None = None,
                 config: dict | None = None, lanes: int = 1):
        self.device = detect_device() if device == "auto" else device
        lanes = max(int(lanes), 1)
        if lanes > 1 and self.device != "cuda":
            raise ValueError("lanes share a GPU: they need device='cuda'")
        if lanes > 1:
            from kbenv.sandbox import memplan
            memplan.set_gpu_lanes(lanes)  # before Ray starts: its actors (and this process's plans) see the share
        ensure_ray(address)
        if n is None:
            n = int(ray.cluster_resources().get("GPU", 0)) if self.device == "cuda" else 1
            if n == 0:
                raise RuntimeError("device='cuda' but the Ray cluster has no GPUs")
        # GPU evaluators: one per GPU wherever Ray finds one (lanes: that many per GPU). CPU evaluators: spread over
        # the cluster's nodes (Ray's SPREAD strategy), so that `n` of them use several machines rather than fill
        # the first.
        if self.device == "cuda":
            opts = {"num_gpus": 1 / lanes, "num_cpus": 1}
        else:
            opts = {"num_cpus": 1, "scheduling_strategy": "SPREAD"}
        self.lanes = lanes
        if lanes > 1:
            config = {**(config or {}), "lanes": lanes}
        self.actors = [Evaluator.options(**opts).remote(self.device, config) for _ in range(n * lanes)]
        ray.get([a.info.remote() for a in self.actors])  # surface construction errors now

    def __len__(self) -> int:
        return len(self.actors)

    def info(self) -> list[dict]:
        return ray.get([a.info.remote() for a in self.actors])

    def evaluate(self, request: EvalRequest) -> EvalResult:
        return next(iter(self.map([request])))[1]

    def map(self, requests: Iterable[EvalRequest]) -> Iterator[tuple[int, EvalResult]]:
        """Evaluate requests, at most one in flight per evaluator; yields ``(index, result)`` as they finish.

        An actor failure (a harness fault) raises ``ray.exceptions.RayActorError`` from this iterator.
        """
        pending = list(enumerate(requests))
        home = self._prebuild(pending)
        idle = list(self.actors)
        inflight: dict = {}
        while pending or inflight:
            while pending and idle:
                a = idle.pop()
                i, req = pending.pop(self._next_for(a, pending, home))
                inflight[a.evaluate.remote(self.hinted(req, pending).to_dict())] = (i, a)
            done, _ = ray.wait(list(inflight), num_returns=1)
            for ref in done:
                i, a = inflight.pop(ref)
                idle.append(a)
                yield i, EvalResult.from_dict(ray.get(ref))

    @staticmethod
    def hinted(req: EvalRequest, pending: list) -> EvalRequest:
        """``req`` with its ``next_problem`` hint (unless the caller set one): the problem first in line after it,
        which an evaluator of one GPU gets next (with several, one of them does). Only what is prepared ahead
        depends on it."""
        if req.next_problem is not None or not pending:
            return req
        return dataclasses.replace(req, next_problem=pending[0][1].problem)

    @staticmethod
    def _next_for(a, pending: list, home: dict) -> int:
        """Which pending request the idle evaluator ``a`` runs next (:func:`pick_next`, with the states of the
        builds it holds for them)."""
        mine = [j for j, (i, _) in enumerate(pending) if home.get(i) is a]
        states = ray.get(a.build_states.remote([pending[j][1].candidate for j in mine])) if mine else []
        return pick_next([req.candidate for _, req in pending], mine, states)

    def _prebuild(self, pending: list) -> dict:
        """Candidates that compile C++/CUDA extensions are spread over the evaluators, which build them ahead
        in sandboxed CPU processes while they evaluate others; returns each such request's evaluator."""
        from kbenv.sandbox.builds import needs_build
        home, batches = {}, {}
        for k, (i, req) in enumerate(x for x in pending if needs_build(x[1].candidate)):
            a = self.actors[k % len(self.actors)]
            home[i] = a
            batches.setdefault(id(a), (a, []))[1].append(req.candidate)
        self._build_refs = [a.prebuild.remote(srcs) for a, srcs in batches.values()]
        return home

    def evaluate_many(self, requests: list[EvalRequest]) -> list[EvalResult]:
        out: list = [None] * len(requests)
        for i, r in self.map(requests):
            out[i] = r
        return out

    def close(self) -> None:
        for a in self.actors:
            try:
                ray.get(a.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - best effort at shutdown
                pass
            ray.kill(a)
        self.actors = []

import logging
import os

# Before anything imports triton: the CPU runs Triton kernels through its interpreter.
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_SCHEDULER_EVENTS", "0")

import pytest  # noqa: E402

from kbtest import DEVICE, HAS_CUDA  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def ray_cluster():
    import ray
    if not ray.is_initialized():
        ray.init(num_cpus=2, num_gpus=1 if HAS_CUDA else 0, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.ERROR, object_store_memory=200 * 1024 * 1024)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("kbenv-cache")


@pytest.fixture(scope="session")
def supervisor(cache_dir):
    """One trusted supervisor for the session (as one Ray actor holds one): short limits for fault tests."""
    from kbenv.sandbox.supervisor import Supervisor
    sup = Supervisor(device=DEVICE, cache_dir=cache_dir, limits={"compile_s": 30, "spawn_s": 15, "trial_s": 10, "timing_s": 60})
    yield sup
    sup.close()


@pytest.fixture(scope="session")
def pool(ray_cluster, cache_dir):
    from kbenv.sandbox.actor import EvaluatorPool
    p = EvaluatorPool(n=1, device=DEVICE, config={"cache_dir": str(cache_dir)})
    yield p
    p.close()


@pytest.fixture(autouse=True)
def _registry_of_shipped_problems_only(monkeypatch):
    """A problem set a test registers (``register_kernelbench_dir``) is gone after it: later tests that walk
    the registry (memory plans, manifests) see the shipped sets only."""
    import kbenv.problems as problems
    monkeypatch.setattr(problems, "_EXTERNAL", dict(problems._EXTERNAL))

"""Baselines: eager and ``torch.compile`` timed with the candidate's protocol in a clean trusted process.

Cached on disk per (problem, problem-source hash, device model, torch version, precision, size, protocol), so
they are measured once per machine type. ``kbenv baselines build`` fills the cache ahead of a run. The
measuring process is a fresh ``python -m kbenv.sandbox.baselines`` that only ever runs the reference, so
neither torch.compile's caches nor a previous candidate can influence it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import torch


def device_model(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device).replace(" ", "_")
    import platform
    return f"cpu-{platform.machine()}"


class BaselineError(RuntimeError):
    """A baseline could not be measured: a harness fault, raised (never a low reward)."""


class BaselineCache:
    def __init__(self, root: Path, device: torch.device, kinds=None, timing: dict | None = None):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.device = torch.device(device)
        # torch.compile on the CPU costs 10-17 s per problem and its speed is not a GPU figure; cpu defaults
        # to eager only (speedups on cpu are reported as not meaningful anyway).
        self.kinds = tuple(kinds) if kinds else (("eager", "compile") if self.device.type == "cuda" else ("eager",))
        if self.device.type == "cpu" and kinds and "compile" in kinds and os.environ.get("KBENV_CPU_COMPILE") != "1":
            self.kinds = tuple(k for k in kinds if k != "compile") or ("eager",)
        self.timing = dict(timing or {})
        self._lock = threading.Lock()

    def key(self, problem, size: str, precision: str) -> str:
        return "__".join([problem.id.replace("/", "_"), problem.source_sha256[:12], device_model(self.device),
                          torch.__version__.replace("+", "_"), precision, size,
                          f"w{self.timing.get('n_warmup')}t{self.timing.get('n_trials')}", "-".join(self.kinds)])

    def _path(self, problem, size: str, precision: str) -> Path:
        return self.root / (self.key(problem, size, precision) + ".json")

    def prefetch(self, items) -> None:
        """Measure every missing (problem, size, precision) in one clean subprocess (one inductor start-up)."""
        with self._lock:
            missing = [(p, z, c) for p, z, c in items if not self._path(p, z, c).exists()]
            if not missing:
                return
            results = measure_in_subprocess(missing, self.device, self.kinds, self.timing)
            for (p, z, c), data in zip(missing, results):
                path = self._path(p, z, c)
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(data, indent=1))
                tmp.replace(path)

    def get(self, problem, size: str, precision: str) -> dict:
        self.prefetch([(problem, size, precision)])
        return json.loads(self._path(problem, size, precision).read_text())


def measure_in_subprocess(items, device, kinds, timing) -> list[dict]:
    jobs = [{"problem": p.id, "problem_file": str(p.path), "overrides": p.overrides(z), "precision": c,
             "device": str(device), "kinds": list(kinds), "timing": timing} for p, z, c in items]
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-m", "kbenv.sandbox.baselines", json.dumps(jobs)],
                          capture_output=True, text=True, env=env, timeout=7200)
    if proc.returncode != 0:
        raise BaselineError(f"baselines for {[j['problem'] for j in jobs]} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if len(out) != len(jobs):
        raise BaselineError("the baseline process returned the wrong number of results")
    return out


def _measure(args: dict) -> dict:
    from kbenv.problems import PRECISIONS, load_namespace, make_inputs, make_model
    from kbenv.sandbox.worker import timed_call

    device = torch.device(args["device"])
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dtype = PRECISIONS[args["precision"]]
    src = Path(args["problem_file"]).read_text()
    ns = load_namespace(src, args["problem_file"], args["overrides"])
    n_warmup = int(args["timing"].get("n_warmup", 5))
    n_trials = int(args["timing"].get("n_trials", 100))
    out = {"problem": args["problem"], "device": args["device"], "precision": args["precision"],
           "torch": torch.__version__, "n_trials": n_trials}
    for kind in args["kinds"]:
        model = make_model(ns, "Model", 42, device, dtype)
        if kind == "compile":
            torch._dynamo.reset()
            model = torch.compile(model)
        times = []
        for k in range(n_warmup + n_trials):
            inputs = make_inputs(ns, 1000 + k, "default", device, dtype)
            _, ms = timed_call(model, inputs, device)
            if k > n_warmup:  # first timed trial discarded, as for the candidate
                times.append(ms)
        t = torch.tensor(times, dtype=torch.float64)
        out[f"{kind}_ms"] = float(t.median())
        out[f"{kind}_mean_ms"] = float(t.mean())
    out.setdefault("compile_ms", None)
    best = min((k for k in args["kinds"]), key=lambda k: out[f"{k}_ms"])
    out["best"], out["best_ms"] = best, out[f"{best}_ms"]
    return out


if __name__ == "__main__":
    print(json.dumps([_measure(job) for job in json.loads(sys.argv[1])]))

"""The trusted supervisor: runs one candidate in a fresh sandboxed worker and turns what comes back into a result.

The supervisor holds the secret, the reference model, the reference outputs and the baselines; the worker
holds none of them. For each evaluation it takes a never-used worker from a pool of one, sends it the
candidate, draws inputs for each correctness trial from seeds mixed with its secret, compares the returned
outputs with its own reference outputs, times the candidate with fresh inputs every call and re-checks
outputs of timed calls chosen after the fact, then calls the pure verdict and reward functions of
``kbenv.rewards``. Every phase has a wall-clock limit enforced from here (the worker is killed on expiry).

Candidate faults become typed results; faults of the harness (a reference that raises, a baseline that cannot
be measured, a bug here) raise :class:`HarnessError` and are never turned into a low reward.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import hmac
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import socket
import threading
import time
import warnings
from collections import OrderedDict
from pathlib import Path

import torch

from kbenv.problems import PRECISIONS, Problem, get_problem, make_inputs, make_model
from kbenv.rewards import checks as C
from kbenv.rewards.amdahl import share_for
from kbenv.rewards.reward import compute_reward, speedup as speedup_of
from kbenv.rewards.verdict import Trial, correctness_checks, judge, judge_checks
from kbenv.sandbox import devshare, wire
from kbenv.sandbox.baselines import BaselineCache
from kbenv.sandbox.result import EvalRequest, EvalResult

# The worker's caching allocator may take at most this share of the GPU; the rest is the supervisor's (reference
# cache, copies of the candidate's outputs, check temporaries). A candidate that bypasses the allocator and
# starves the supervisor is caught by Supervisor._oom_verdict.
WORKER_GPU_FRACTION = 0.5
PATTERN_A, PATTERN_B = 0xFE, 0x7F  # poison bytes: 0xFEFEFEFE is -1.7e38 in fp32, 0x7F7F... is +3.4e38
N_INPUT_SAMPLES = 4096
DEFAULT_LIMITS = {"compile_s": 180.0, "trial_s": 120.0, "timing_s": 300.0, "spawn_s": 120.0}
# Peak figures for the physical floor (H200 SXM datasheet: HBM3e 4.8 TB/s, dense bf16 ~990 TFLOP/s). fp32 uses
# the TF32 tensor-core rate (~495 TFLOP/s), not the 67 TFLOP/s of plain fp32 units: split-TF32 schemes reach
# fp32 accuracy on tensor cores, and the floor must stay a lower bound. A kernel reported faster than the floor
# is rejected, never paid.
PEAKS = {"bytes_per_s": 4.8e12, "flops": {"bf16": 990e12, "fp16": 990e12, "fp32": 495e12}}


class HarnessError(RuntimeError):
    """A fault of kbenv itself: raised loudly, never converted into a reward."""


class CandidateFault(Exception):
    def __init__(self, category: str, reason: str, error: str | None = None):
        super().__init__(reason)
        self.category, self.reason, self.error = category, reason, error


def have_bwrap() -> bool:
    return shutil.which("bwrap") is not None


@dataclasses.dataclass
class _ProblemState:
    problem: Problem
    ns: dict
    model: torch.nn.Module
    refs: OrderedDict  # (seed, domain) -> (inputs, outputs)
    native: torch.nn.Module | None = None  # the model at the problem's precision (gives output dtypes)
    out_dtypes: list | None = None


class _WorkerProc:
    """A spawned worker: its process, pipes, arena and private directory."""

    def __init__(self, proc, fd_to, fd_from, arena_fd, workdir: Path, sock=None):
        self.proc, self.fd_to, self.fd_from = proc, fd_to, fd_from
        self.arena = wire.TensorArena(arena_fd)
        self.workdir = workdir
        self.nonce = os.urandom(16).hex()
        self.sock = sock  # passes device-buffer descriptors (cuda)
        self.probe = None  # the probe buffer, until the ready frame is checked
        self.devbuf = None  # the output buffer lent for this evaluation
        self.devshare = False
        self.devshare_error = ""  # why outputs fell back to the host arena in this evaluation, if they did
        self.spawned_at = time.monotonic()
        self.started = False
        self.startup: dict = {}

    def send(self, obj: dict) -> None:
        obj["nonce"] = self.nonce
        try:
            wire.write_frame(self.fd_to, obj)
        except (BrokenPipeError, OSError) as e:
            raise wire.ChannelClosed(f"worker pipe closed: {e}") from e

    def recv(self, timeout_s: float) -> dict:
        msg = wire.read_frame(self.fd_from, time.monotonic() + timeout_s)
        if msg.get("nonce") != self.nonce:
            raise wire.ChannelClosed("frame with a wrong nonce")
        return msg

    pid_ns: str | None = None

    def signal_kill(self) -> None:
        """SIGKILL the sandbox and every process of its PID namespace now, without waiting for them to exit."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        for pid in _pids_in_namespace(self.pid_ns) if self.pid_ns else []:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def pause(self) -> list[int]:
        """SIGSTOP every process of this (spare) worker's tree; returns the pids stopped, for :meth:`resume`.

        A spare worker imports and warms up while the current evaluation runs; during a timing phase nothing
        of it may run, not even on the CPU (a host-side stall between the timer's events and the kernel's
        launch shows up in the measured time). A stopped process can still be SIGKILLed.
        """
        stopped: set[int] = set()
        if self.proc.poll() is not None:
            return []
        for _ in range(3):  # a process forked between the scan and the signal is caught by the next scan
            new = [p for p in _process_tree(self.proc.pid) if p not in stopped]
            if not new:
                break
            for pid in new:
                try:
                    os.kill(pid, signal.SIGSTOP)
                    stopped.add(pid)
                except (ProcessLookupError, PermissionError):
                    pass
        return sorted(stopped)

    @staticmethod
    def resume(pids: list[int]) -> None:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass

    dead = False

    def kill(self) -> None:
        """SIGKILL the sandbox, wait until every process of it is gone, close the channel (idempotent)."""
        if self.dead:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired as e:
            raise HarnessError(f"worker {self.proc.pid} survived SIGKILL") from e
        if self.pid_ns:
            # The namespace's processes die asynchronously once bwrap is gone; wait (and help) until they are.
            deadline = time.monotonic() + 10
            while True:
                left = _pids_in_namespace(self.pid_ns)
                if not left:
                    break
                if time.monotonic() > deadline:
                    raise HarnessError(f"sandbox processes {left} survived the evaluation")
                for pid in left:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                time.sleep(0.02)
        self.dead = True
        self.arena.close()
        for fd in (self.fd_to, self.fd_from, self.arena.fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def release_buffers(self) -> None:
        """Release the device memory lent to the worker; only once it is dead (its mappings are gone), and on
        the supervisor's own thread (the CUDA context is current there)."""
        for buf in (self.probe, self.devbuf):
            if buf is not None:
                buf.close()
        self.probe = self.devbuf = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def drain_output(self) -> None:
        buf = bytearray()
        stream = self.proc.stdout
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                break
            buf += chunk
            if len(buf) > (64 << 10):
                del buf[:len(buf) - (64 << 10)]
            self.output = bytes(buf)
        self.output = bytes(buf)

    output: bytes = b""

    def log_tail(self, n: int = 3000) -> str:
        # Give the reader thread a moment to collect what a dying process wrote last.
        for _ in range(50):
            if self.proc.poll() is not None and (self.proc.stdout is None or self.proc.stdout.closed
                                                 or not self._pending()):
                break
            time.sleep(0.01)
        return self.output.decode(errors="replace")[-n:]

    def _pending(self) -> bool:
        import select as _select
        try:
            r, _, _ = _select.select([self.proc.stdout], [], [], 0)
            return bool(r)
        except (ValueError, OSError):
            return False


class Supervisor:
    """Evaluates candidates for one device. Not thread-safe: one evaluation at a time (one per GPU).

    Args:
        device: ``cpu`` or ``cuda[:i]``.
        sandbox: ``bwrap`` (fail if missing), ``none`` (rlimits and a private directory only) or ``auto``.
        cache_dir: where baselines and Triton compile caches persist.
        limits: per-phase wall-clock limits in seconds (``compile_s``, ``trial_s``, ``timing_s``).
        timing: ``{"n_warmup", "n_trials", "n_checked"}``; defaults to KernelBench's protocol on cuda (5
            warmups, 100 trials, first discarded) and a short run on cpu.
        reference_budget_bytes: LRU budget for cached reference inputs and outputs on the device.
        baselines: which baselines to time (``eager``, ``compile``); the faster is the speedup's denominator.
        memory_limit_bytes: host address-space limit for the worker (cpu only; CUDA needs a large virtual
            address space) and the GPU memory fraction cap on cuda.
        secret: bytes mixed into every seed; random by default.
        keep_spare: keep clean workers started ahead of the next evaluation (False: start one per evaluation).
        spares: how many (default 1); every spare is SIGSTOPped while a candidate is timed.
    """

    def __init__(self, device: str = "cpu", sandbox: str = "auto", cache_dir: str | os.PathLike | None = None,
                 limits: dict | None = None, timing: dict | None = None,
                 reference_budget_bytes: int | None = None, baselines: tuple = ("eager", "compile"),
                 memory_limit_bytes: int | None = None, secret: bytes | None = None, keep_spare: bool = True,
                 spares: int = 1):
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        sandbox = os.environ.get("KBENV_SANDBOX", sandbox) if sandbox == "auto" else sandbox
        if sandbox == "auto":
            sandbox = "bwrap" if have_bwrap() else "none"
        if sandbox == "bwrap" and not have_bwrap():
            raise HarnessError("sandbox='bwrap' but bubblewrap is not installed (apt-get install bubblewrap)")
        self.sandbox = sandbox
        self.cache_dir = Path(cache_dir or os.environ.get("KBENV_CACHE", Path.home() / ".cache" / "kbenv"))
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.limits = {**DEFAULT_LIMITS, **(limits or {})}
        cuda = self.device.type == "cuda"
        # A quarter of the timed calls (at least 4), chosen after each call returns, are re-checked at secret
        # positions: a candidate that replays on a fraction f of calls escapes with probability (1 - f)^25.
        self.timing = {"n_warmup": 5 if cuda else 1, "n_trials": 100 if cuda else 5, **(timing or {})}
        self.timing.setdefault("n_checked", max(4, int(self.timing["n_trials"]) // 4))
        self.reference_budget = reference_budget_bytes or ((32 << 30) if cuda else (1 << 30))
        self.baselines = BaselineCache(self.cache_dir / "baselines", self.device, kinds=baselines,
                                       timing=self.timing)
        self.memory_limit = memory_limit_bytes or (16 << 30)
        self.secret = secret or os.urandom(32)
        self.keep_spare = keep_spare
        # How many clean workers wait ready beside the running one. One hides a worker's start-up when
        # candidates leave gaps between them; back to back, a start-up (torch import, profiler warm-up: ~4 s on
        # an H200 machine) can outlast an evaluation, and a second spare gets two evaluations' time for it, at
        # the cost of one more idle CUDA context (~0.5 GiB).
        self.n_spares = max(int(spares), 1) if keep_spare else 0
        self._states: OrderedDict[tuple, _ProblemState] = OrderedDict()
        self._ref_bytes = 0
        self._eval_counter = 0
        self._spares: list[_WorkerProc] = []  # the next worker first
        self._reapers: list[threading.Thread] = []
        self._reap_errors: list[BaseException] = []
        # Outputs travel through device memory lent to the worker on cuda (None: not tried yet; False: the
        # driver or the sandbox does not allow it, and outputs go through the host arena).
        self.devshare: bool | None = None
        self.devshare_reason = ""
        self._root = Path(tempfile.mkdtemp(prefix="kbenv-sup-"))
        self._spares = [self._spawn() for _ in range(self.n_spares)]
        self._start_spares()

    @property
    def _spare(self) -> "_WorkerProc | None":
        """The worker the next evaluation takes (None without spares)."""
        return self._spares[0] if self._spares else None

    # ------------------------------------------------------------------------------------ seeds and refs
    def _seed(self, *parts) -> int:
        msg = "|".join(str(p) for p in parts).encode()
        return int.from_bytes(hmac.new(self.secret, msg, hashlib.sha256).digest()[:8], "big") & ((1 << 62) - 1)

    def _state(self, problem: Problem, size: str, precision: str) -> _ProblemState:
        key = (problem.id, size, precision)
        st = self._states.get(key)
        if st is None:
            ns = problem.namespace(size)
            try:
                model = make_model(ns, "Model", self._model_seed(problem), self.device, PRECISIONS[precision])
            except Exception as e:  # noqa: BLE001
                raise HarnessError(f"{problem.id}: the reference model could not be built: {e!r}") from e
            # At bf16/fp16 the reference runs in fp32 on the same (rounded) inputs and weights and is rounded
            # once at the end: low-precision PyTorch kernels can be far off (bf16 cumsum on CUDA is ~25% off
            # float64), and a candidate must not be failed for being more accurate than that.
            ref_model = model if precision == "fp32" else copy.deepcopy(model).float()
            st = _ProblemState(problem, ns, ref_model, OrderedDict(), native=model)
            self._states[key] = st
        self._states.move_to_end(key)
        return st

    def _model_seed(self, problem: Problem) -> int:
        # Public and fixed (the candidate must build identical random weights); inputs use secret seeds.
        return 42

    def reference(self, st: _ProblemState, seed: int, domain: str, precision: str, cache: bool = True):
        """Trusted inputs and reference outputs for a seed, cached within the byte budget (LRU)."""
        key = (seed, domain)
        if key in st.refs:
            st.refs.move_to_end(key)
            return st.refs[key]
        dtype = PRECISIONS[precision]
        try:
            inputs = make_inputs(st.ns, seed, domain, self.device, dtype, st.problem.broad_inputs)
            up = [x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() and dtype != torch.float32
                  else x for x in inputs]
            with torch.no_grad():
                out = st.model(*up)
        except Exception as e:  # noqa: BLE001
            raise HarnessError(f"{st.problem.id}: the reference raised on domain {domain}: {e!r}") from e
        outs = [o.detach() for o in (out if isinstance(out, (tuple, list)) else [out])]
        if dtype != torch.float32:
            if st.out_dtypes is None:
                with torch.no_grad():
                    nat = st.native(*inputs)
                st.out_dtypes = [o.dtype for o in (nat if isinstance(nat, (tuple, list)) else [nat])]
                del nat
            outs = [o.to(d) for o, d in zip(outs, st.out_dtypes)]
        if cache:
            nbytes = sum(_nbytes(x) for x in list(inputs) + outs)
            st.refs[key] = (inputs, outs)
            self._ref_bytes += nbytes
            self._evict()
        return inputs, outs

    def _evict(self) -> None:
        while self._ref_bytes > self.reference_budget:
            victim = None
            for st in self._states.values():
                if st.refs:
                    victim = st
                    break
            if victim is None:
                break
            _, (inp, outs) = victim.refs.popitem(last=False)
            self._ref_bytes -= sum(_nbytes(x) for x in list(inp) + outs)

    # -------------------------------------------------------------------------------------- processes
    def _spawn(self) -> _WorkerProc:
        workdir = Path(tempfile.mkdtemp(prefix="w-", dir=self._root))
        os.chmod(workdir, 0o777)
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        arena = os.memfd_create("kbenv-arena", 0)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workdir), "TMPDIR": str(workdir),
            "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
            "TRITON_CACHE_DIR": str(workdir / ".triton"), "TORCH_EXTENSIONS_DIR": str(workdir / ".torch_ext"),
            "TORCHINDUCTOR_CACHE_DIR": str(workdir / ".inductor"), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        }
        for k in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "VIRTUAL_ENV"):
            if k in os.environ:
                env[k] = os.environ[k]
        if self.device.type == "cpu":
            env["TRITON_INTERPRET"] = "1"
        env["KBENV_WORKER_DEVICE"] = str(self.device)
        cmd = [sys.executable, "-m", "kbenv.sandbox.worker", str(to_r), str(from_w), str(arena)]
        pass_fds = [to_r, from_w, arena]
        sock = child_sock = None
        if self.device.type == "cuda" and self.devshare is not False:
            sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            cmd.append(str(child_sock.fileno()))
            pass_fds.append(child_sock.fileno())
        if self.sandbox == "bwrap":
            cmd = self._bwrap_args(workdir) + cmd
        mem = self.memory_limit if self.device.type == "cpu" else None

        def limits():
            os.setsid()
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
            # Bounds any one file the candidate writes. The output arena is sized by the supervisor before each
            # trial (its ftruncate is not subject to this limit), so outputs of any size still fit.
            resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 30, 1 << 30))
            if mem:
                resource.setrlimit(resource.RLIMIT_AS, (mem, mem))

        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=env, cwd=workdir, pass_fds=pass_fds, preexec_fn=limits)
        os.close(to_r)
        os.close(from_w)
        w = _WorkerProc(proc, to_w, from_r, arena, workdir, sock)
        if child_sock is not None:
            child_sock.close()
        # The candidate's stdout and stderr decide nothing; only their last 64 KiB are kept (in memory: a
        # candidate printing forever cannot fill a disk) for crash reports.
        threading.Thread(target=w.drain_output, daemon=True).start()
        return w

    def _bwrap_args(self, workdir: Path) -> list[str]:
        """bubblewrap: read-only root, a read-only empty /tmp, the private workdir the only writable place,
        no network (own network namespace with loopback only), own PID/IPC/UTS namespaces, no capabilities,
        uid nobody, killed with the supervisor."""
        dev = ["--dev-bind", "/dev", "/dev"] if self.device.type == "cuda" else ["--dev", "/dev"]
        return ["bwrap", "--ro-bind", "/", "/", *dev, "--proc", "/proc", "--tmpfs", "/tmp",
                *_code_under_tmp(), "--bind", str(workdir), str(workdir), "--remount-ro", "/tmp",
                "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                "--uid", "65534", "--gid", "65534", "--chdir", str(workdir)]

    def _release(self) -> None:
        """Hand freed device memory back to the driver, so the worker (another process) can use it."""
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def _take_worker(self, start_spare: bool = True) -> _WorkerProc:
        w = self._spares.pop(0) if self._spares else None
        if w is None or w.proc.poll() is not None:
            if w is not None:
                self._dispose(w)
            w = self._spawn()
        self._await_ready(w)
        for s in [s for s in self._spares if s.proc.poll() is not None]:  # a spare that died waiting
            self._spares.remove(s)
            self._dispose(s)
        while len(self._spares) < self.n_spares:
            self._spares.append(self._spawn())
        if start_spare:
            self._start_spares()
        return w

    def _start_spares(self) -> None:
        for s in self._spares:
            self._start(s)

    def _start(self, w: _WorkerProc | None) -> None:
        """Let a spawned worker touch the GPU (CUDA context, probes). On cuda a spare waits for this after its
        imports, so its start-up never runs on the GPU during another candidate's timing phase."""
        if w is None or w.started:
            return
        w.started = True
        if self.device.type != "cuda":
            return
        try:
            if w.sock is not None and self.devshare is not False:
                try:
                    w.probe = devshare.SharedDeviceBuffer.create(self.device, 1 << 21)
                except devshare.DevShareError as e:
                    self._no_devshare(f"the supervisor cannot allocate shareable device memory: {e}")
                else:
                    devshare.send_fd(w.sock, w.probe.fd, b"P", w.probe.size)
            wire.write_frame(w.fd_to, {"type": "start", "nonce": None, "probe": w.probe is not None})
        except OSError:
            pass  # the worker is gone; _await_ready reports it

    def _await_ready(self, w: _WorkerProc) -> None:
        """The worker's first frame, sent before any candidate code exists: without it, the harness is broken."""
        if getattr(w, "ready", False):
            return
        self._start(w)
        try:
            msg = wire.read_frame(w.fd_from, time.monotonic() + self.limits["spawn_s"])
        except (wire.ChannelClosed, wire.ChannelTimeout) as e:
            tail = w.log_tail()
            self._dispose(w)
            raise HarnessError(f"the worker process did not start ({e!r}); sandbox={self.sandbox}; log:\n{tail}") from e
        if msg.get("type") != "ready":
            self._dispose(w)
            raise HarnessError("the worker's first frame was not 'ready'")
        w.ready = True
        w.startup = {k: round(float(v), 3) for k, v in (msg.get("startup") or {}).items()
                     if isinstance(v, (int, float))} if isinstance(msg.get("startup"), dict) else {}
        w.startup["spawn_to_ready"] = round(time.monotonic() - w.spawned_at, 3)
        if w.probe is not None:
            self._check_probe(w, msg)
        ns = msg.get("pid_ns")
        if self.sandbox == "bwrap" and isinstance(ns, str) and ns != os.readlink("/proc/self/ns/pid"):
            w.pid_ns = ns  # the sandbox's own PID namespace: everything in it dies with the evaluation

    def wait_spare(self) -> None:
        """Block until the spare worker is up (imports, CUDA context, probes), as it is whenever candidates do
        not arrive back to back; benchmarks use it to time an evaluation without the next worker's start-up."""
        for s in self._spares:
            if s.proc.poll() is None:
                self._await_ready(s)

    def _check_probe(self, w: _WorkerProc, msg: dict) -> None:
        """Device sharing is used only if the worker (before any candidate code) wrote the token it reported
        into the probe buffer; otherwise outputs go through the host arena."""
        token = msg.get("devshare")
        got = None
        if isinstance(token, str):
            got = bytes(w.probe.bytes_view(0, 16).cpu().tolist()).hex()
        w.probe.close()
        w.probe = None
        if isinstance(token, str) and got == token:
            w.devshare = True
            self.devshare = True
        else:
            why = msg.get("devshare_error") if isinstance(msg.get("devshare_error"), str) else "token mismatch"
            self._no_devshare(f"the worker could not map shared device memory: {why}")

    def _no_devshare(self, why: str) -> None:
        if self.devshare is not False:
            warnings.warn(f"kbenv: outputs go through host memory (slower for large outputs): {why}", stacklevel=3)
        self.devshare = False
        self.devshare_reason = why

    def _lend_devbuf(self, w: _WorkerProc, nbytes: int) -> bool:
        """Make sure the worker holds a zeroed device buffer of at least ``nbytes``; True if a new one was sent."""
        if w.devbuf is not None and w.devbuf.size >= nbytes:
            return False
        if w.devbuf is not None:
            w.devbuf.close()
            w.devbuf = None
        try:
            w.devbuf = devshare.SharedDeviceBuffer.create(self.device, nbytes)
        except devshare.DevShareError as e:
            # Most likely out of device memory in the supervisor: this evaluation's outputs take the host path.
            w.devshare = False
            w.devshare_error = str(e)
            return False
        try:
            devshare.send_fd(w.sock, w.devbuf.fd, b"B", w.devbuf.size)
        except OSError as e:
            raise wire.ChannelClosed(f"worker socket closed: {e}") from e
        return True

    def close(self) -> None:
        self.join_reapers()
        while self._spares:
            self._dispose(self._spares.pop())
        shutil.rmtree(self._root, ignore_errors=True)

    # -------------------------------------------------------------------------------------- evaluation
    def evaluate(self, req: EvalRequest) -> EvalResult:
        """Evaluate one candidate; see :class:`EvalRequest` and :class:`EvalResult` for the contract."""
        t_start = time.monotonic()
        problem = get_problem(req.problem)
        precision = req.precision or problem.precision_default
        if precision not in problem.precision_allowed:
            raise ValueError(f"{problem.id} does not run at {precision}; allowed: {problem.precision_allowed}")
        if req.share is not None:
            share, share_status, profile_name = float(req.share), "given", None
        else:
            share, share_status, profile_name = share_for(req.profile, problem.family, problem.set)
        res = EvalResult.empty(req, problem, precision, self.device, share)
        res.facts.update({"share_status": share_status, "profile": profile_name})
        self._eval_counter += 1
        st = self._state(problem, req.size, precision)
        phases: dict[str, float] = {"prepare": time.monotonic() - t_start}
        t0 = time.monotonic()
        self.join_reapers()  # the previous worker's device memory is back before this one allocates any
        phases["previous_exit"] = time.monotonic() - t0
        t0 = time.monotonic()
        w = self._take_worker(start_spare=not req.measure_time)
        phases["worker_wait"] = time.monotonic() - t0
        self._phases = phases
        try:
            self._run(req, res, st, w, precision, phases)
        except CandidateFault as f:
            res.fail(f.category, f.reason, f.error)
        except torch.OutOfMemoryError as e:
            f = self._oom_verdict(w, st, e)
            res.fail(f.category, f.reason, f.error)
        finally:
            self._save_triton_cache(req, w)
            t0 = time.monotonic()
            w.signal_kill()
            self._start_spares()  # timing (the last phase) is over: the next workers may start on the GPU
            # A process with a large CUDA context takes 1-2 s to exit. The result does not wait for that: a
            # reaper thread waits for every process of the sandbox, and the next evaluation joins it before it
            # takes a worker (close() before returning), so a dying worker never shares the GPU with the next.
            self._reap_in_background(w)
            phases["worker_exit"] = time.monotonic() - t0
        self._release()
        self._phases = None
        res.facts["output_transport"] = "device" if w.devshare else "host"
        if w.devshare_error:
            res.facts["output_transport_error"] = w.devshare_error
        if w.startup:
            res.facts["worker_startup_s"] = w.startup
        phases["total"] = time.monotonic() - t_start
        res.phase_seconds = {k: round(v, 4) for k, v in phases.items()}
        res.finalize_reward(req.reward_fn, share, req.fast_p)
        return res

    def _oom_verdict(self, w: _WorkerProc, st: _ProblemState, err: Exception) -> CandidateFault:
        """The trusted side ran out of device memory while a candidate's worker was alive.

        The worker is killed and waited for; if the memory a trial needs is then free, the candidate held it
        (beyond its allocator cap, or through the driver directly): a candidate fault. If it still is not
        free, the machine is too small for the problem or something else holds the GPU: a harness fault.
        """
        self._dispose(w)
        torch.cuda.empty_cache()
        need = 4 * max((sum(_nbytes(o) for o in outs) for _, outs in st.refs.values()), default=1 << 30) + (2 << 30)
        free, _ = torch.cuda.mem_get_info(self.device)
        if free >= need:
            return CandidateFault("oom", "the candidate held so much GPU memory that the trusted checks could not "
                                  f"run (they need {need / 2**30:.1f} GiB; {free / 2**30:.1f} GiB was free once the "
                                  "candidate's process was gone)", str(err)[-2000:])
        raise HarnessError(f"the supervisor ran out of GPU memory with no candidate process alive ({free / 2**30:.1f}"
                           f" GiB free, {need / 2**30:.1f} GiB needed): {err}") from err

    @staticmethod
    def _dispose(w: _WorkerProc) -> None:
        w.kill()
        w.release_buffers()

    def _reap_in_background(self, w: _WorkerProc) -> None:
        def reap():
            try:
                w.kill()  # its lent device memory is released by join_reapers, on the supervisor's thread
                shutil.rmtree(w.workdir, ignore_errors=True)
            except BaseException as e:  # noqa: BLE001 - re-raised by join_reapers in the caller's thread
                self._reap_errors.append(e)
        t = threading.Thread(target=reap, name=f"kbenv-reap-{w.proc.pid}", daemon=True)
        t.start()
        self._reapers.append((t, w))

    def join_reapers(self) -> None:
        """Wait until every finished evaluation's sandbox processes are gone; a survivor is a HarnessError."""
        while self._reapers:
            t, w = self._reapers.pop()
            t.join()
            if w.proc.poll() is not None:
                w.release_buffers()
        if self._reap_errors:
            err = self._reap_errors.pop()
            self._reap_errors.clear()
            raise err if isinstance(err, HarnessError) else HarnessError(f"reaping a worker failed: {err!r}")

    def _tick(self, name: str, t0: float) -> None:
        """Add the time since ``t0`` to a sub-phase of the current evaluation (reported in phase_seconds)."""
        if self._phases is not None:
            self._phases[name] = self._phases.get(name, 0.0) + time.monotonic() - t0

    _phases: dict | None = None

    def _add_worker_account(self, reply: dict, prefix: str, keys: tuple) -> None:
        """Add the worker's own account of its time (``reply["spent"]``) to the sub-phases: a claim of the
        untrusted process, reported for diagnostics and never judged."""
        spent = reply.get("spent")
        if not isinstance(spent, dict) or self._phases is None:
            return
        for k in keys:
            if isinstance(spent.get(k), float):
                name = f"{prefix}_{k}"
                self._phases[name] = self._phases.get(name, 0.0) + spent[k]

    def _call(self, w: _WorkerProc, msg: dict, timeout_s: float, phase: str) -> dict:
        try:
            w.send(msg)
            reply = w.recv(timeout_s)
        except wire.ChannelTimeout:
            raise CandidateFault("timeout", f"the {phase} phase ran past its {timeout_s:.0f} s limit") from None
        except wire.ChannelClosed as e:
            raise self._death(w, phase, str(e)) from None
        if reply.get("type") != "reply":
            raise CandidateFault("crash", f"protocol violation during {phase}: unexpected frame")
        if "error" in reply:
            if reply.get("error_type") == "harness":
                raise HarnessError(f"the worker's harness failed during {phase}: {str(reply['error'])[-3000:]}")
            cat = reply.get("error_type", "runtime")
            if cat not in ("compile", "runtime", "oom", "crash", "timeout"):
                cat = "runtime"
            where = reply.get("where") if isinstance(reply.get("where"), str) else phase
            raise CandidateFault(cat, f"{cat} error in {where}", str(reply["error"])[-4000:])
        return reply

    def _death(self, w: _WorkerProc, phase: str, why: str) -> CandidateFault:
        try:
            code = w.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._dispose(w)
            code = w.proc.returncode
        tail = w.log_tail()
        if code is not None and code < 0:
            sig = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            reason = f"the worker died from {sig} during {phase}"
        else:
            reason = f"the worker exited with status {code} during {phase} ({why})"
        cat = "oom" if re.search(r"out of memory|MemoryError|can't allocate memory", tail) else "crash"
        if "illegal memory access" in tail:
            reason += " (CUDA illegal memory access)"
        return CandidateFault(cat, reason, tail or None)

    def _trial(self, w, st, seed, domain, pattern, precision, positions=True, suppress=False):
        fresh = domain.startswith("fresh:")
        domain = domain.removeprefix("fresh:")
        t0 = time.monotonic()
        inputs, refs = self.reference(st, seed, domain, precision, cache=not fresh)
        self._tick("trial_reference", t0)
        in_pos = None
        if positions:
            gen = torch.Generator().manual_seed(self._seed("inpos", seed))
            in_pos = [torch.randint(0, max(x.numel(), 1), (N_INPUT_SAMPLES,), generator=gen).tolist()
                      if isinstance(x, torch.Tensor) else None for x in inputs]
        out_bytes = sum(_nbytes(r) for r in refs)
        self._size_arena(w, out_bytes + sum(N_INPUT_SAMPLES * 8 + 64 for _ in inputs) + (1 << 20))
        msg = {"type": "trial", "seed": seed, "domain": domain, "pattern": pattern,
               "poison_bytes": 2 * out_bytes + (64 << 20), "input_positions": in_pos, "suppress_custom": suppress,
               "expected": [list(r.shape) for r in refs]}
        if w.devshare:
            try:
                if self._lend_devbuf(w, out_bytes + 256 * len(refs)):
                    msg["devbuf"] = "new"
                elif not w.devshare:
                    msg["devbuf"] = "none"  # the supervisor could not lend a larger buffer: use the arena
            except wire.ChannelClosed as e:
                raise self._death(w, "correctness", str(e)) from None
        t0 = time.monotonic()
        reply = self._call(w, msg, self.limits["trial_s"], "correctness")
        self._tick("trial_worker", t0)
        self._add_worker_account(reply, "trial_worker", ("inputs", "poison", "forward", "report"))
        t0 = time.monotonic()
        outs = []
        for d in _field(reply, "outputs", list, []):
            outs.append(None if d is None else self._get(w, d))
        metas = [m if isinstance(m, dict) else {"type": "invalid"} for m in _field(reply, "meta", list, [])]
        samples = None
        if in_pos is not None and _field(reply, "input_samples", list) is not None:
            exp, got = [], []
            for x, p, d in zip(inputs, in_pos, reply["input_samples"]):
                if p is None or d is None:
                    continue
                exp.append(x.detach().reshape(-1)[torch.as_tensor(p, device=x.device) % max(x.numel(), 1)].cpu())
                got.append(self._get(w, d, "cpu"))
            if exp:
                samples = (torch.cat([e.reshape(-1).double() for e in exp]),
                           torch.cat([g.reshape(-1).double() for g in got]) if all(
                               g.numel() == e.numel() for g, e in zip(got, exp)) else torch.empty(0))
        # Placeholders for outputs that were not copied keep the per-output structure for the checks: the
        # reported shape (wrong_shape) or an empty tensor (wrong_type).
        outs = [o if o is not None else (torch.empty(0) if "shape" not in m else _ShapeOnly(m["shape"]))
                for o, m in zip(outs + [None] * (len(metas) - len(outs)), metas)]
        self._tick("trial_fetch", t0)
        return inputs, refs, outs, metas, samples, reply

    @staticmethod
    def _size_arena(w, nbytes: int) -> None:
        if os.fstat(w.arena.fd).st_size < nbytes:
            os.ftruncate(w.arena.fd, nbytes)

    def _get(self, w, desc, device=None):
        try:
            if isinstance(desc, dict) and desc.get("loc") == "device":
                if w.devbuf is None:
                    raise wire.ChannelClosed("a device descriptor but no device buffer was lent")
                dtype, shape, off, nbytes = wire.parse_descriptor(desc, w.devbuf.size)
                # Copied out at once into memory only the supervisor holds; the lent buffer is never judged.
                raw = w.devbuf.bytes_view(off, nbytes).to(device or self.device, copy=True)
                return wire.from_raw(raw, dtype, shape)
            return w.arena.get(desc, device or self.device)
        except wire.ChannelClosed as e:
            raise CandidateFault("crash", f"protocol violation: {e}") from None

    def _run(self, req: EvalRequest, res: EvalResult, st: _ProblemState, w: _WorkerProc, precision: str,
             phases: dict) -> None:
        problem = st.problem
        # -- compile ---------------------------------------------------------------------------------
        t0 = time.monotonic()
        self._restore_triton_cache(req, w)
        self._call(w, {"type": "setup", "problem_source": problem.source, "overrides": problem.overrides(req.size),
                       "candidate_source": req.candidate, "device": str(self.device), "precision": precision,
                       "broad_inputs": list(problem.broad_inputs) if problem.broad_inputs is not None else None,
                       "model_seed": self._model_seed(problem),
                       "gpu_memory_fraction": WORKER_GPU_FRACTION if self.device.type == "cuda" else None},
                   self.limits["compile_s"], "compile")
        phases["compile"] = time.monotonic() - t0
        # -- correctness -----------------------------------------------------------------------------
        t0 = time.monotonic()
        # Official inputs first (two runs: two poison patterns, determinism), then each broader domain, then
        # fresh official inputs drawn for this evaluation only (a candidate that turns bad after N calls, or
        # replays stored answers, fails an official trial, not only a broad one).
        plan = [("default", self._seed(problem.id, req.size, "t0"))]
        for d in problem.domains[1:]:
            plan.append((d, self._seed(problem.id, req.size, "domain", d)))
        plan.append(("fresh:default", self._seed(problem.id, req.size, "fresh", self._eval_counter, os.urandom(8).hex())))
        per_trial: list[tuple[str, list]] = []
        launches = 0
        kernels: list = []
        threads_left = 0
        inv, tol = problem.invariants, problem.tolerance
        for i, (domain, seed) in enumerate(plan):
            inputs, refs, outs_a, metas, samples, reply = self._trial(w, st, seed, domain, PATTERN_A, precision)
            launches = max(launches, _field(reply, "launches", int, 0))
            kernels = sorted({str(k)[:100] for k in _field(reply, "kernels", list, [])})[:32]
            threads_left = max(threads_left, _field(reply, "threads_left", int, 0))
            outs_b = None
            if i == 0:
                _, _, outs_b, _, _, _ = self._trial(w, st, seed, domain, PATTERN_B, precision, positions=False)
            trial = Trial(domain.replace("fresh:", ""), inputs, refs, outs_a, outs_b, metas, PATTERN_A, PATTERN_B,
                          samples)
            # Check each trial as it arrives and drop its tensors: keeping every trial's outputs of a
            # full-size problem alive at once would take tens of GiB.
            t1 = time.monotonic()
            per_trial.append((trial.domain, correctness_checks(trial, precision, inv, tol, seed=i)))
            self._tick("trial_checks", t1)
            del trial, inputs, refs, outs_a, outs_b
            t1 = time.monotonic()
            self._release()
            self._tick("trial_release", t1)
        phases["correctness"] = time.monotonic() - t0
        verdict = judge_checks(per_trial)
        res.correct = verdict.correct
        if not verdict.passed:
            res.set_verdict(verdict)
            return
        # -- decoy -----------------------------------------------------------------------------------
        decoy = {"custom_launches": launches, "noop_correct": None, "custom_gpu_share": None,
                 "triton_kernels": kernels}
        t0 = time.monotonic()
        if launches > 0:
            inputs, refs, outs, metas, _, _ = self._trial(w, st, plan[0][1], "default", PATTERN_A, precision,
                                                          positions=False, suppress=True)
            noop = judge([Trial("default", inputs, refs, outs, None, metas, PATTERN_A, PATTERN_B)], precision,
                         inv, tol)
            decoy["noop_correct"] = noop.correct
            del inputs, refs, outs
            self._release()
        phases["decoy_noop"] = time.monotonic() - t0
        t0 = time.monotonic()
        if self.device.type == "cuda":
            names = custom_kernel_names(req.candidate)
            prof = self._call(w, {"type": "profile", "seed": plan[0][1], "custom_names": sorted(names)},
                              self.limits["trial_s"], "profile")
            decoy["custom_gpu_share"] = _field(prof, "custom_share", float, 0.0)
            if launches == 0 and decoy["custom_gpu_share"] > 0:
                decoy["custom_launches"] = 1  # CUDA extension kernels seen by the profiler
            phases["profile"] = time.monotonic() - t0
        res.facts["decoy"] = decoy
        if not req.measure_time:
            res.set_verdict(judge_checks(per_trial, decoy=decoy))
            return
        # -- timing ----------------------------------------------------------------------------------
        t0 = time.monotonic()
        paused = [pid for s in self._spares for pid in s.pause()]
        try:
            timing = self._time(req, w, st, precision)
        finally:
            _WorkerProc.resume(paused)
        res.facts["spare_paused"] = len(paused)
        res.timings = dict(timing.pop("stats"))
        phases["timing"] = time.monotonic() - t0
        timing["threads_left"] = max(timing.get("threads_left", 0), threads_left)
        base = self.baselines.get(problem, req.size, precision)
        res.baseline = base
        if self.device.type == "cuda" and req.size == "full":
            timing["floor_ms"] = problem.floor_ms(precision, PEAKS["bytes_per_s"], PEAKS["flops"][precision])
            res.timings["floor_ms"] = timing["floor_ms"]
        res.set_verdict(judge_checks(per_trial, timing=timing, decoy=decoy))
        if res.timings.get("median_ms"):
            res.speedup = speedup_of(base["best_ms"], res.timings["median_ms"])

    def _time(self, req, w: _WorkerProc, st: _ProblemState, precision: str) -> dict:
        n_warmup, n_trials = int(self.timing["n_warmup"]), int(self.timing["n_trials"])
        n = n_warmup + n_trials
        rng = torch.Generator().manual_seed(self._seed("check", self._eval_counter, os.urandom(8).hex()))
        timed = list(range(n_warmup + 1, n))  # the first timed trial is discarded
        k_check = min(int(self.timing["n_checked"]), len(timed))
        picks = set(torch.randperm(len(timed), generator=rng)[:max(k_check - 1, 0)].add(n_warmup + 1).tolist())
        picks.add(n - 1)
        times, replay_checks = [], []
        seeds = [self._seed("time", self._eval_counter, k, os.urandom(8).hex()) for k in range(n)]
        t_wall = time.monotonic()
        try:
            self._size_arena(w, 64 * N_INPUT_SAMPLES * 8 + (1 << 20))
            w.send({"type": "time", "n_warmup": n_warmup, "n_trials": n_trials})
            for k in range(n):
                w.send({"type": "seed", "seed": seeds[k]})
                msg = w.recv(self.limits["timing_s"])
                if msg.get("type") == "reply" and "error" in msg:
                    raise CandidateFault(msg.get("error_type", "runtime") if msg.get("error_type") in
                                         ("runtime", "oom", "crash") else "runtime",
                                         "error during timing", str(msg["error"])[-4000:])
                if msg.get("type") != "ms":
                    raise CandidateFault("crash", "protocol violation during timing")
                ms = _field(msg, "ms", float)
                if ms is None:
                    raise CandidateFault("crash", "protocol violation during timing: no time")
                if k > n_warmup:
                    times.append(ms)
                if k in picks:
                    t_pick = time.monotonic()
                    inputs, refs = self.reference(st, seeds[k], "default", precision, cache=False)
                    gen = torch.Generator().manual_seed(self._seed("outpos", seeds[k]))
                    pos = [torch.randint(0, max(r.numel(), 1), (N_INPUT_SAMPLES,), generator=gen).tolist()
                           for r in refs]
                    w.send({"type": "positions", "positions": pos})
                    got = w.recv(self.limits["timing_s"])
                    if got.get("type") != "samples":
                        raise CandidateFault("crash", "protocol violation during timing")
                    for j, (r, p, d) in enumerate(zip(refs, pos, _field(got, "values", list, []))):
                        exp = r.reshape(-1)[torch.as_tensor(p, device=r.device) % max(r.numel(), 1)].cpu()
                        vals = self._get(w, d, "cpu") if d is not None else torch.empty(0)
                        ref_max = float(r.double().abs().max()) if r.numel() and r.is_floating_point() else 1.0
                        replay_checks.append(C.check_sampled(exp, vals, ref_max, precision,
                                                             f"timed_call_{k}_output_{j}", "replay"))
                    del inputs, refs
                    self._tick("timing_rechecks", t_pick)
                else:
                    w.send({"type": "skip"})
            final = w.recv(self.limits["timing_s"])
        except wire.ChannelTimeout:
            raise CandidateFault("timeout", f"the timing phase ran past its {self.limits['timing_s']:.0f} s limit") from None
        except wire.ChannelClosed as e:
            raise self._death(w, "timing", str(e)) from None
        wall_ms = (time.monotonic() - t_wall) * 1e3
        self._add_worker_account(final, "timing_worker", ("inputs", "timed_call", "samples"))
        if final.get("type") != "reply" or "error" in final:
            raise CandidateFault("runtime", "error at the end of timing", str(final.get("error", ""))[-4000:])
        t = torch.tensor(times, dtype=torch.float64)
        stats = {"median_ms": float(t.median()), "mean_ms": float(t.mean()), "min_ms": float(t.min()),
                 "std_ms": float(t.std()) if len(times) > 1 else 0.0, "trials": len(times)}
        req_res = {"reported_total_ms": float(t.sum()), "wall_ms": wall_ms, "replay_checks": replay_checks,
                   "median_ms": stats["median_ms"], "timers_intact": _field(final, "timers_intact", bool, False),
                   "timers_detail": _field(final, "timers_detail", str, ""),
                   "threads_left": _field(final, "threads_left", int, 0),
                   "l2_persisting_bytes": _field(final, "l2_persisting_bytes", int)}
        req_res["stats"] = stats
        return req_res

    # -------------------------------------------------------------------------------- triton cache
    def _cache_key(self, req) -> Path:
        h = hashlib.sha256(req.candidate.encode()).hexdigest()
        return self.cache_dir / "triton" / f"{self.device.type}-{h}"

    def _restore_triton_cache(self, req, w) -> None:
        src = self._cache_key(req)
        if src.is_dir():
            shutil.copytree(src, w.workdir / ".triton", dirs_exist_ok=True)

    def _save_triton_cache(self, req, w) -> None:
        src, dst = w.workdir / ".triton", self._cache_key(req)
        if src.is_dir() and not dst.exists() and not src.is_symlink():
            try:
                shutil.copytree(src, dst, symlinks=False, ignore_dangling_symlinks=True)
            except (OSError, shutil.Error):
                shutil.rmtree(dst, ignore_errors=True)


def _ShapeOnly(shape) -> torch.Tensor:
    """A stand-in with the reported (wrong) shape and no storage, for the shape check."""
    return torch.empty(shape, device="meta")


def custom_kernel_names(source: str) -> set[str]:
    """Names of the kernels a candidate defines: ``@triton.jit`` functions and ``__global__`` CUDA functions."""
    names = set(re.findall(r"__global__\s+(?:void|[\w:<>]+)\s+(\w+)\s*\(", source))
    names |= set(re.findall(r"@triton\.(?:jit|autotune)[\s\S]*?def\s+(\w+)\s*\(", source))
    return names


def _field(d, key: str, typ, default=None):
    """A typed field of a frame from the worker. Frames are candidate-controllable data: a wrong type is the
    candidate's protocol violation (a typed crash), never an exception in the trusted process."""
    v = d.get(key) if isinstance(d, dict) else None
    if v is None:
        return default
    if typ is float and isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if typ is int and isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, typ) and typ not in (int, float):
        return v
    raise CandidateFault("crash", f"protocol violation: field {key!r} of a worker frame has the wrong type")


def _code_under_tmp() -> list[str]:
    """Read-only binds for the interpreter, its packages and kbenv's source when they live under /tmp (a clone
    or venv there), which the sandbox otherwise replaces with an empty directory."""
    import kbenv
    paths = {sys.prefix, sys.exec_prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)),
             str(Path(kbenv.__file__).resolve().parents[1])}
    paths |= {p for p in sys.path if p}
    paths |= {p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    keep = sorted({os.path.realpath(p) for p in paths if os.path.isdir(p)
                   and os.path.realpath(p).startswith("/tmp/")})
    top = [p for p in keep if not any(p != q and p.startswith(q + "/") for q in keep)]
    return [arg for p in top for arg in ("--ro-bind", p, p)]


def _process_tree(root: int) -> list[int]:
    """``root`` and its descendants, from /proc (the host's view, which sees into the sandbox's namespaces)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
                ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, ()))
    return out


def _pids_in_namespace(ns: str) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == ns:
                    out.append(int(entry))
            except OSError:
                continue
    return out


def _nbytes(x) -> int:
    return x.numel() * x.element_size() if isinstance(x, torch.Tensor) else 0

"""The candidate's worker process: UNTRUSTED once the candidate's code is imported.

Started by the supervisor (``python -m kbenv.sandbox.worker IN_FD OUT_FD ARENA_FD [SOCK_FD]``), inside
bubblewrap where available. It never receives a reference output, a threshold or a verdict: it receives seeds and commands,
builds inputs, runs the candidate and sends back outputs, raw timings and observed facts. The harness
captures the timer functions and Triton's launch entry points before the candidate's code is imported, and
reports (as facts the supervisor checks) whether they were replaced.

Commands (supervisor -> worker), each answered by one frame unless noted:

- ``setup``: problem source and size overrides, candidate source, device, precision, model seed. Imports the
  candidate and builds ``ModelNew``; answers ``{"ok"}`` or ``{"error", "error_type"}``.
- ``trial``: a seed, a domain and a poison byte; builds inputs, poisons memory, runs one forward, answers with
  output descriptors, per-output facts and input values at the given positions. Outputs go into the device
  buffer the supervisor lent (cuda; ``"devbuf": "new"`` means its descriptor waits on SOCK_FD), else into the
  arena.
- ``time``: warmup and trial counts; then per trial the supervisor sends ``{"seed"}`` and the worker answers
  ``{"ms"}``, then ``{"positions"}`` or ``{"skip"}`` and the worker answers with sampled output values.
- ``profile``: one forward under torch.profiler (cuda): custom kernels' share of kernel time.
- ``exit``.
"""

from __future__ import annotations

import builtins
import ctypes
import gc
import os
import sys
import threading
import time
import traceback

# Captured before any candidate code runs; the harness uses only these.
_T_START = time.perf_counter()
_type = builtins.type
_isinstance = builtins.isinstance
_perf_counter = time.perf_counter
_perf_counter_ns = time.perf_counter_ns
_monotonic = time.monotonic
_thread_enumerate = threading.enumerate

import torch  # noqa: E402

from kbenv.sandbox import wire  # noqa: E402

def _static(obj, attr):
    """The attribute as stored (a class's ``__dict__`` entry, not a freshly bound method)."""
    d = getattr(obj, "__dict__", {})
    return d[attr] if attr in d else getattr(obj, attr, None)


_TIMERS: list[tuple[object, str, object]] = [
    (time, "perf_counter", time.perf_counter), (time, "perf_counter_ns", time.perf_counter_ns),
    (time, "monotonic", time.monotonic), (time, "time", time.time),
    (torch.cuda, "synchronize", torch.cuda.synchronize), (torch.cuda, "Event", torch.cuda.Event),
    (torch.cuda.Event, "record", torch.cuda.Event.record),
    (torch.cuda.Event, "elapsed_time", torch.cuda.Event.elapsed_time),
    (torch.cuda.Event, "synchronize", torch.cuda.Event.synchronize),
    (torch.Tensor, "__torch_function__", _static(torch.Tensor, "__torch_function__")),
]
_TIMERS = [(o, a, _static(o, a)) for o, a, _ in _TIMERS]
_cuda_sync = torch.cuda.synchronize
_Event = torch.cuda.Event
_ev_record = torch.cuda.Event.record
_ev_elapsed = torch.cuda.Event.elapsed_time
_ev_sync = torch.cuda.Event.synchronize

_LAUNCHES = {"count": 0, "suppress": False, "names": set()}


def _install_launch_hooks() -> list:
    """Count (and on request suppress) Triton kernel launches, compiled or interpreted."""
    hooked = []
    try:
        from triton.runtime import jit as _jit
        classes = [_jit.JITFunction]
        try:
            from triton.runtime import interpreter as _interp
            classes.append(_interp.InterpretedFunction)
        except ImportError:
            pass
    except ImportError:
        return hooked
    for cls in classes:
        orig = cls.run

        def run(self, *args, _orig=orig, **kwargs):
            if kwargs.get("warmup", False):
                return _orig(self, *args, **kwargs)
            if _LAUNCHES["suppress"]:
                _LAUNCHES["count"] += 1
                return None
            out = _orig(self, *args, **kwargs)
            _LAUNCHES["count"] += 1  # only launches that compiled and ran count
            if len(_LAUNCHES["names"]) < 32:
                _LAUNCHES["names"].add(str(getattr(getattr(self, "fn", None), "__name__", "?")))
            return out

        cls.run = run
        hooked.append((cls, "run", run))
    return hooked


_HOOKS = _install_launch_hooks()


def _timers_intact() -> tuple[bool, str]:
    changed = [f"{getattr(o, '__name__', o)}.{a}" for o, a, f in _TIMERS + _HOOKS if _static(o, a) is not f]
    return (not changed, ("replaced: " + ", ".join(changed)) if changed else "")


# ------------------------------------------------------------------------------------------- L2 and poison

_CUDART = None


def _cudart():
    global _CUDART
    if _CUDART is None:
        _CUDART = False
        for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
            try:
                _CUDART = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if not _CUDART:
            import glob
            for path in glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "cu*", "lib",
                                               "libcudart.so*")):
                try:
                    _CUDART = ctypes.CDLL(path)
                    break
                except OSError:
                    continue
    return _CUDART or None


def persisting_l2_bytes() -> int | None:
    lib = _cudart()
    if lib is None:
        return None
    val = ctypes.c_size_t(0)
    if lib.cudaDeviceGetLimit(ctypes.byref(val), 0x06) != 0:  # cudaLimitPersistingL2CacheSize
        return None
    return int(val.value)


def reset_persisting_l2() -> None:
    lib = _cudart()
    if lib is not None:
        lib.cudaDeviceSetLimit(0x06, ctypes.c_size_t(0))
        lib.cudaCtxResetPersistingL2Cache()


_L2_FLUSH: dict = {}


def flush_l2(device) -> None:
    """Evict the L2 by writing 256 MiB (KernelBench's flush), outside the timed region."""
    buf = _L2_FLUSH.get(str(device))
    if buf is None:
        buf = _L2_FLUSH[str(device)] = torch.empty(32 * 1024 * 1024, dtype=torch.int64, device=device)
    buf.fill_(1)


def poison(device, byte: int, nbytes: int) -> None:
    """Make the next allocations return memory filled with ``byte``.

    cpu: glibc's M_PERTURB fills every new allocation with the complement of its argument.
    cuda: fill blocks of the caching allocator, then free them back into its cache, so ``torch.empty``
    returns poisoned memory (a candidate that calls ``empty_cache`` gets fresh driver memory instead, whose
    content is arbitrary; unwritten elements then fail the error checks).
    """
    if device.type == "cpu":
        ctypes.CDLL(None).mallopt(-6, (~byte) & 0xFF)  # M_PERTURB
        return
    blocks = []
    try:
        blocks.append(torch.empty(max(nbytes, 1 << 20), dtype=torch.uint8, device=device))
        for _ in range(32):  # small pool (allocations <= 1 MiB live in 2 MiB segments)
            blocks.append(torch.empty(1 << 20, dtype=torch.uint8, device=device))
    except torch.cuda.OutOfMemoryError:
        pass
    for b in blocks:
        b.fill_(byte)
    _cuda_sync(device)
    del blocks


# ----------------------------------------------------------------------------------------------- worker

class DeviceOutbox:
    """Outputs copied device to device into a buffer the supervisor lent (see ``kbenv.sandbox.devshare``)."""

    def __init__(self, buf):
        self.buf, self.offset = buf, 0

    def reset(self) -> None:
        self.offset = 0

    def put(self, t: torch.Tensor) -> dict | None:
        """The tensor's descriptor, or None if it does not fit (the caller falls back to the arena)."""
        t = t.detach()
        if t.dtype == torch.bool:
            t, name = t.to(torch.uint8), "bool"
        else:
            name = wire.DTYPE_NAMES.get(t.dtype)
        if name is None or t.device.type != "cuda":
            return None
        src = t.contiguous().reshape(-1).view(torch.uint8)
        off = (self.offset + 255) // 256 * 256
        if off + src.numel() > self.buf.size:
            return None
        if src.numel():
            self.buf.bytes_view(off, src.numel()).copy_(src)
        self.offset = off + src.numel()
        return {"dtype": name, "shape": list(t.shape), "offset": off, "nbytes": src.numel(), "loc": "device"}


class Worker:
    def __init__(self, fd_in: int, fd_out: int, fd_arena: int, sock=None):
        self.fd_in, self.fd_out = fd_in, fd_out
        self.arena = wire.TensorArena(fd_arena)
        self.sock = sock
        self.outbox: DeviceOutbox | None = None
        self.nonce = None
        self.model = None
        self.ns = None
        self.device = None
        self.dtype = None
        self.broad_inputs = None
        self.harness_threads = set(_thread_enumerate())
        self.last_inputs = None

    def send(self, obj: dict) -> None:
        obj["nonce"] = self.nonce
        wire.write_frame(self.fd_out, obj)

    def recv(self) -> dict:
        msg = wire.read_frame(self.fd_in)
        if self.nonce is None:
            self.nonce = msg.get("nonce")
        return msg

    # -- setup ----------------------------------------------------------------------------------------
    def setup(self, msg: dict) -> dict:
        from kbenv.problems import load_namespace, make_model, PRECISIONS
        self.device = torch.device(msg["device"])
        self.dtype = PRECISIONS[msg["precision"]]
        self.broad_inputs = msg.get("broad_inputs")
        self.ns = load_namespace(msg["problem_source"], "problem.py", msg.get("overrides") or {})
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            frac = msg.get("gpu_memory_fraction")
            if frac:
                torch.cuda.set_per_process_memory_fraction(float(frac), self.device)
        path = os.path.join(os.getcwd(), "candidate.py")
        with open(path, "w") as f:
            f.write(msg["candidate_source"])
        t0 = _perf_counter()
        import importlib.util
        spec = importlib.util.spec_from_file_location("candidate", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["candidate"] = mod
        try:
            spec.loader.exec_module(mod)
        except SyntaxError as e:
            return {"error": _tb(e), "error_type": "compile", "where": "syntax"}
        except MemoryError as e:
            return {"error": _tb(e), "error_type": "oom", "where": "import"}
        except BaseException as e:  # noqa: BLE001 - the candidate's fault, reported as data
            return {"error": _tb(e), "error_type": _classify(e, "compile"), "where": "import"}
        cls = getattr(mod, "ModelNew", None)
        if not (_isinstance(cls, _type) and issubclass(cls, torch.nn.Module)):
            return {"error": "the candidate defines no nn.Module subclass named ModelNew", "error_type": "compile",
                    "where": "ModelNew"}
        try:
            self.model = make_model(self.ns, "ModelNew", msg["model_seed"], self.device, self.dtype, cls=cls)
        except BaseException as e:  # noqa: BLE001
            return {"error": _tb(e), "error_type": _classify(e, "compile"), "where": "constructor"}
        return {"ok": True, "seconds": _perf_counter() - t0}

    def make_inputs(self, seed: int, domain: str):
        from kbenv.problems import make_inputs
        return make_inputs(self.ns, seed, domain, self.device, self.dtype, self.broad_inputs)

    def sync(self):
        if self.device.type == "cuda":
            _cuda_sync(self.device)  # device-wide: waits for work on every stream

    def forward(self, inputs):
        with torch.no_grad():
            out = self.model(*inputs)
        self.sync()
        return out

    # -- correctness ------------------------------------------------------------------------------------
    def _take_devbuf(self) -> None:
        from kbenv.sandbox import devshare
        fd, nbytes = devshare.recv_fd(self.sock, b"B")
        if self.outbox is not None:
            self.outbox.buf.close()
        self.outbox = DeviceOutbox(devshare.SharedDeviceBuffer.import_fd(self.device, fd, nbytes))

    def trial(self, msg: dict) -> dict:
        if msg.get("devbuf") == "new":
            try:
                self._take_devbuf()
            except Exception as e:  # noqa: BLE001 - the probe at start-up worked, so the candidate interfered
                return {"error": _tb(e), "error_type": "crash", "where": "mapping the output buffer"}
        elif msg.get("devbuf") == "none" and self.outbox is not None:
            self.outbox.buf.close()
            self.outbox = None
        if self.outbox is not None:
            self.outbox.reset()
        # Where the worker's time goes (diagnostics for phase_seconds; a worker's claim, never judged).
        spent = {}
        t = _perf_counter()
        self.last_inputs = None  # the previous trial's inputs are not kept alive beside the new ones
        inputs = self.make_inputs(msg["seed"], msg["domain"])
        in_ptrs = _storage_ranges(inputs)
        self.sync()
        spent["inputs"] = _perf_counter() - t
        t = _perf_counter()
        out_bytes = int(msg.get("poison_bytes", 0))
        poison(self.device, int(msg["pattern"]), out_bytes)
        spent["poison"] = _perf_counter() - t
        t = _perf_counter()
        _LAUNCHES["count"] = 0
        _LAUNCHES["suppress"] = bool(msg.get("suppress_custom"))
        try:
            out = self.forward(inputs)
        finally:
            _LAUNCHES["suppress"] = False
            if self.device.type == "cpu":
                ctypes.CDLL(None).mallopt(-6, 0)
        launches = _LAUNCHES["count"]
        spent["forward"] = _perf_counter() - t
        t = _perf_counter()
        try:
            reply = self._report(out, inputs, in_ptrs, launches, msg)
            spent["report"] = _perf_counter() - t
            reply["spent"] = spent
            return reply
        except (wire.ChannelClosed, wire.ChannelTimeout):
            raise
        except Exception as e:  # noqa: BLE001 - the harness's own step failed: not the candidate's fault
            return {"error": _tb(e), "error_type": "harness", "where": "trial-report"}

    def _report(self, out, inputs, in_ptrs, launches, msg) -> dict:
        outs = list(out) if _type(out) in (tuple, list) else [out]
        descs, metas = [], []
        expected = msg.get("expected") or []
        for i, o in enumerate(outs):
            if _type(o) is not torch.Tensor:
                metas.append({"type": f"{_type(o).__module__}.{_type(o).__qualname__}"})
                descs.append(None)
                continue
            if o.device.type != self.device.type or o.layout != torch.strided or o.is_quantized:
                metas.append({"type": f"torch.Tensor ({o.device.type}, {o.layout})"})
                descs.append(None)
                continue
            if i < len(expected) and list(o.shape) != list(expected[i]):
                # Never copy an output of the wrong shape (it may be a huge broadcast view): report the shape.
                metas.append({"type": "torch.Tensor", "shape": list(o.shape)})
                descs.append(None)
                continue
            metas.append({"type": "torch.Tensor", "aliases_input": _overlaps(o, in_ptrs),
                          "device": str(o.device)})
            d = self.outbox.put(o) if self.outbox is not None else None
            descs.append(d if d is not None else self.arena.put(o))
        if self.outbox is not None:
            self.sync()  # the copies into the lent buffer are complete before the supervisor reads it
        samples = None
        if msg.get("input_positions") is not None:
            samples = [self.arena.put(_sample(x, p)) if p is not None else None
                       for x, p in zip(inputs, msg["input_positions"])]
        threads = [t for t in _thread_enumerate() if t not in self.harness_threads and t.is_alive()]
        self.last_inputs = inputs
        return {"outputs": descs, "meta": metas, "input_samples": samples, "launches": launches,
                "threads_left": len(threads), "kernels": sorted(_LAUNCHES["names"])}

    # -- timing ------------------------------------------------------------------------------------------
    def time(self, msg: dict) -> dict:
        n = int(msg["n_warmup"]) + int(msg["n_trials"])
        cuda = self.device.type == "cuda"
        threads_max = 0
        spent = {"inputs": 0.0, "timed_call": 0.0, "samples": 0.0}  # diagnostics: a claim, never judged
        for k in range(n):
            step = self.recv()
            if step.get("type") != "seed":
                raise wire.ChannelClosed("expected a seed frame")
            t = _perf_counter()
            inputs = self.make_inputs(step["seed"], "default")
            self.sync()
            t1 = _perf_counter()
            out, ms = timed_call(self.model, inputs, self.device)
            spent["inputs"] += t1 - t
            spent["timed_call"] += _perf_counter() - t1
            threads_max = max(threads_max, len([t for t in _thread_enumerate()
                                                if t not in self.harness_threads and t.is_alive()]))
            self.send({"type": "ms", "k": k, "ms": float(ms)})
            ask = self.recv()
            if ask.get("type") == "positions":
                t = _perf_counter()
                outs = list(out) if _type(out) in (tuple, list) else [out]
                vals = []
                for o, p in zip(outs, ask["positions"]):
                    if _type(o) is not torch.Tensor or p is None:
                        vals.append(None)
                    else:
                        vals.append(self.arena.put(_sample(o, p)))
                spent["samples"] += _perf_counter() - t
                self.send({"type": "samples", "values": vals})
            del out, inputs
        intact, detail = _timers_intact()
        return {"timers_intact": intact, "timers_detail": detail, "threads_left": threads_max,
                "l2_persisting_bytes": persisting_l2_bytes() if cuda else None, "spent": spent}

    def profile(self, msg: dict) -> dict:
        """One forward under torch.profiler: custom kernels' share of the candidate's kernel time."""
        from torch.profiler import ProfilerActivity, profile
        inputs = self.last_inputs or self.make_inputs(msg["seed"], "default")
        names = set(msg.get("custom_names", []))
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            self.forward(inputs)
        total = custom = 0.0
        for ev in prof.events():
            if getattr(ev, "device_type", None) is None or str(ev.device_type).endswith("CUDA") is False:
                continue
            dur = float(getattr(ev, "device_time", 0.0) or getattr(ev, "cuda_time", 0.0) or 0.0)
            total += dur
            if any(n and n in ev.name for n in names):
                custom += dur
        return {"custom_share": (custom / total) if total > 0 else 0.0, "kernel_us": total}

    def serve(self) -> None:
        while True:
            msg = self.recv()
            kind = msg.get("type")
            if kind == "exit":
                return
            handler = {"setup": self.setup, "trial": self.trial, "time": self.time, "profile": self.profile}.get(kind)
            if handler is None:
                raise wire.ChannelClosed(f"unknown command {kind!r}")
            self.arena.reset()
            try:
                reply = handler(msg)
            except (wire.ChannelClosed, wire.ChannelTimeout):
                raise
            except BaseException as e:  # noqa: BLE001 - anything the candidate raised is data
                reply = {"error": _tb(e), "error_type": _classify(e, "runtime"), "where": kind}
            reply["type"] = "reply"
            self.send(reply)


def timed_call(model, inputs, device):
    """One timed call, KernelBench's protocol plus a device-wide synchronize inside the timed region.

    cuda: flush the L2 (256 MiB write) and reset persisting-L2 state outside the timed region, then CUDA events
    around the call and a device-wide synchronize, so work left on any stream is counted. cpu: the host clock
    around the call (the interpreter's timings are not GPU figures). The baseline process uses this same
    function for eager and torch.compile, so both sides are timed identically.
    """
    if device.type == "cuda":
        flush_l2(device)
        reset_persisting_l2()
        _cuda_sync(device)
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        _ev_record(start)
        with torch.no_grad():
            out = model(*inputs)
        _cuda_sync(device)
        _ev_record(end)
        _ev_sync(end)
        return out, float(_ev_elapsed(start, end))
    t0 = _perf_counter_ns()
    with torch.no_grad():
        out = model(*inputs)
    return out, (_perf_counter_ns() - t0) / 1e6


def _classify(e: BaseException, default: str) -> str:
    text = f"{_type(e).__name__}: {e}"
    if _isinstance(e, MemoryError) or "out of memory" in text.lower() or "can't allocate memory" in text:
        return "oom"
    if "illegal memory access" in text or "CUDA error" in text:
        return "crash"
    if _isinstance(e, (ImportError, SyntaxError)):
        return "compile"
    return default


def _tb(e: BaseException) -> str:
    return "".join(traceback.format_exception(_type(e), e, e.__traceback__))[-4000:]


def _storage_ranges(inputs) -> list[tuple[int, int]]:
    out = []
    for x in inputs:
        if _type(x) is torch.Tensor:
            s = x.untyped_storage()
            out.append((s.data_ptr(), s.data_ptr() + s.nbytes()))
    return out


def _overlaps(o: torch.Tensor, ranges) -> bool:
    s = o.untyped_storage()
    a, b = s.data_ptr(), s.data_ptr() + s.nbytes()
    return any(a < hi and lo < b for lo, hi in ranges if hi > lo)


def _sample(x, positions) -> torch.Tensor:
    flat = x.detach().reshape(-1)
    idx = torch.as_tensor(positions, dtype=torch.int64, device=flat.device) % max(flat.numel(), 1)
    return flat[idx].cpu()


def _warm_profiler_host() -> None:
    """A CPU-only profiler session before CUDA exists: loads torch.profiler and Kineto without touching the GPU,
    so less of the profiler's start-up is left for after the GPU is free."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            torch.ones(4).add_(1)
        prof.events()
    except Exception:  # noqa: BLE001 - an optimisation only; the CUDA warm-up below still runs
        pass


def _warm_profiler(device) -> None:
    from torch.profiler import ProfilerActivity, profile
    x = torch.ones(16, device=device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        x.add_(1)
        _cuda_sync(device)
    prof.events()


def _probe_devshare(sock, device) -> dict:
    """Map the supervisor's probe buffer and write a token into it: proves device sharing works here,
    before any candidate code exists (so a later failure to map a buffer is the candidate's doing)."""
    try:
        from kbenv.sandbox import devshare
        fd, nbytes = devshare.recv_fd(sock, b"P")
        buf = devshare.SharedDeviceBuffer.import_fd(device, fd, nbytes)
        token = os.urandom(16)
        buf.bytes_view(0, 16).copy_(torch.frombuffer(bytearray(token), dtype=torch.uint8))
        _cuda_sync(device)
        buf.close()
        return {"devshare": token.hex()}
    except Exception as e:  # noqa: BLE001 - reported to the supervisor, which falls back to the arena
        return {"devshare": None, "devshare_error": f"{_type(e).__name__}: {e}"[:500]}


def main(argv=None) -> int:
    argv = argv or sys.argv[1:]
    fd_in, fd_out, fd_arena = (int(a) for a in argv[:3])
    sock = None
    if len(argv) > 3:
        import socket
        sock = socket.socket(fileno=int(argv[3]))
    dev = os.environ.get("KBENV_WORKER_DEVICE", "")
    ready = {"type": "ready", "nonce": None, "pid_ns": os.readlink("/proc/self/ns/pid")}
    startup = {"imports": _perf_counter() - _T_START}
    if dev.startswith("cuda"):
        # A spare worker waits with CUDA (and the profiler's CUPTI) initialised, so their start-up costs are not
        # on an evaluation's path; it touches the GPU only once the supervisor says so (never during another
        # candidate's timing phase).
        t = _perf_counter()
        _warm_profiler_host()  # the profiler's host side loads while the spare waits for its turn on the GPU
        startup["profiler_host_warmup"] = _perf_counter() - t
        t = _perf_counter()
        try:
            go = wire.read_frame(fd_in)
        except (wire.ChannelClosed, wire.ChannelTimeout):
            return 3
        if go.get("type") != "start":
            return 3
        startup["held"] = _perf_counter() - t
        t = _perf_counter()
        torch.cuda.init()
        torch.empty(1, device=dev)
        startup["cuda_init"] = _perf_counter() - t
        if sock is not None and go.get("probe") is True:
            t = _perf_counter()
            ready.update(_probe_devshare(sock, torch.device(dev)))
            startup["devshare_probe"] = _perf_counter() - t
        t = _perf_counter()
        _warm_profiler(torch.device(dev))
        startup["profiler_warmup"] = _perf_counter() - t
    ready["startup"] = startup
    w = Worker(fd_in, fd_out, fd_arena, sock)
    try:
        # The harness is up (imports done, hooks installed) before any candidate code exists in this process;
        # a worker that never says so is a harness fault, not a candidate's.
        wire.write_frame(fd_out, ready)
        w.serve()
    except (wire.ChannelClosed, wire.ChannelTimeout):
        return 3
    finally:
        gc.collect()
    return 0


if __name__ == "__main__":
    os._exit(main())

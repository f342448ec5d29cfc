"""The executor: the process that runs a candidate (or, for baselines, the reference) on lent memory.

``python -m kbenv.sandbox.executor IN_FD OUT_FD MEMFD [SOCK_FD]``. UNTRUSTED once the candidate is imported:
nothing here measures, times, samples or decides anything. It builds ``ModelNew``, then for every call runs the
forward on views of inputs the supervisor wrote into lent memory. Outputs: on the CPU copied into the lent place the
call names; on cuda left where the forward wrote them and named in the reply (an IPC handle and offset), or not
delivered at all (trusted baselines). Its replies are hints: the supervisor reads memory it maps itself, after
its own fence, and its own clock.
"""

from __future__ import annotations

import os
import sys


def _drop_privileges() -> None:
    """Become the unprivileged host user the supervisor names, before anything else runs (bubblewrap started
    this process as host root so that it could mount; a uid mapped to root is not unprivileged)."""
    uid = os.environ.get("KBENV_RUN_AS")
    if uid is None or os.getuid() != 0:
        return
    import ctypes
    _bound_writes(os.environ.pop("KBENV_TMP_BOUND", ""))
    os.setgroups([])
    os.setgid(int(uid))
    os.setuid(int(uid))
    ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    if os.getuid() == 0 or os.geteuid() == 0:
        os._exit(4)


def _bound_writes(bound: str) -> None:
    """Remount the sandbox's /tmp, the one place this process may write, with the supervisor's bound ("BYTES:FILES",
    ``process.write_bound``), while it is still root in its own mount namespace; unbounded, a candidate could fill
    the host's memory through it. A remount that fails ends the process before any candidate code exists (the
    supervisor's SpawnError: a fault of the machine, raised loudly)."""
    if not bound:
        return
    import ctypes
    size, files = bound.split(":")
    opts = f"size={int(size)}" + (f",nr_inodes={int(files)}" if files else "")
    ms_nosuid, ms_nodev, ms_remount = 2, 4, 32  # bubblewrap mounted it nosuid, nodev: a remount keeps only those named
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"tmpfs", b"/tmp", b"tmpfs", ms_remount | ms_nosuid | ms_nodev, opts.encode()) != 0:
        os.write(2, f"kbenv: could not bound /tmp ({os.strerror(ctypes.get_errno())})\n".encode())
        os._exit(5)


def _limit_tasks() -> None:
    """In a user namespace: this sandbox's own task limit, set from inside, where it counts this namespace's tasks
    only (``process.userns_task_limit``); as root the supervisor set it before the uid of its own took over."""
    n = os.environ.pop("KBENV_TASK_LIMIT", None)
    if n:
        import resource
        resource.setrlimit(resource.RLIMIT_NPROC, (int(n), int(n)))


_drop_privileges()
_limit_tasks()

import torch  # noqa: E402

from kbenv.rewards.precision import ieee_fp32  # noqa: E402
from kbenv.sandbox import wire  # noqa: E402
from kbenv.sandbox.lent import Places  # noqa: E402
from kbenv.sandbox.wire import DTYPES  # noqa: E402


def _classify(e: BaseException, default: str) -> str:
    text = f"{type(e).__name__}: {e}".lower()
    if isinstance(e, MemoryError) or "out of memory" in text or "can't allocate memory" in text:
        return "oom"
    if "illegal memory access" in text or "cuda error" in text:
        return "crash"
    if isinstance(e, (ImportError, SyntaxError)):
        return "compile"
    return default


def _unpack_prebuilt(name: str) -> None:
    """This source's extension build, made ahead by a builder, into the extension directory (torch then finds it
    up to date and only loads it); if it cannot be unpacked, the import compiles as usual."""
    import tarfile
    from kbenv.sandbox.builds import unpack_build
    try:
        unpack_build(os.path.join(os.environ.get("KBENV_INBOX", os.getcwd()), os.path.basename(name)),
                     os.environ.get("TORCH_EXTENSIONS_DIR", "."))
    except (OSError, tarfile.TarError):
        pass


def _error(e: BaseException, default: str, where: str) -> dict:
    import traceback
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:]
    return {"error": tb, "category": _classify(e, default), "where": where}


class Executor:
    def __init__(self, fd_in: int, fd_out: int, memfd: int, sock):
        self.fd_in, self.fd_out, self.memfd, self.sock = fd_in, fd_out, memfd, sock
        self.model = None
        self.device = None
        self.raw = None  # the lent region's bytes
        self.places = None  # fresh typed tensors over them, one per place and call (kbenv.sandbox.lent.Places)
        self.deliver = "copy"
        self.kept = {}  # outputs left in place, by their lent place's offset, until that place's next call

    def _map_region(self) -> None:
        if self.device.type == "cuda":
            from kbenv.sandbox import devshare
            fd, nbytes = devshare.recv_fd(self.sock, b"B")
            self._buf = devshare.SharedDeviceBuffer.import_fd(self.device, fd, nbytes)
            self.raw = self._buf.bytes_view()
        else:
            import mmap
            import warnings
            size = os.fstat(self.memfd).st_size
            self._mm = mmap.mmap(self.memfd, size, access=mmap.ACCESS_WRITE)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                self.raw = torch.frombuffer(self._mm, dtype=torch.uint8, count=size)
        self.places = Places(self.raw)

    def setup(self, msg: dict) -> dict:
        from kbenv.problems import PRECISIONS, load_namespace, make_model
        self.device = torch.device(msg["device"])
        self.deliver = msg.get("deliver", "copy") if self.device.type == "cuda" else "copy"
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self._map_region()
        ns = load_namespace(msg["problem_source"], "problem.py", msg.get("overrides") or {})
        dtype = PRECISIONS[msg["precision"]]
        cls = ns["Model"]
        if msg.get("prebuilt"):
            _unpack_prebuilt(str(msg["prebuilt"]))
        if msg["candidate_source"]:
            path = os.path.join(os.getcwd(), "candidate.py")
            with open(path, "w", encoding="utf-8") as f:  # Python source is UTF-8, whatever the locale
                f.write(msg["candidate_source"])
            import importlib.util
            spec = importlib.util.spec_from_file_location("candidate", path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules["candidate"] = mod
            try:
                spec.loader.exec_module(mod)
            except BaseException as e:  # noqa: BLE001 - the candidate's fault, reported as data
                return _error(e, "compile", "import")
            cls = getattr(mod, "ModelNew", None)
            if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
                return {"error": "the candidate defines no nn.Module subclass named ModelNew", "category": "compile",
                        "where": "ModelNew"}
        try:
            self.model = make_model(ns, "ModelNew", int(msg["model_seed"]), self.device, dtype, cls=cls)
            if msg.get("compile"):
                self.model = torch.compile(self.model)
        except BaseException as e:  # noqa: BLE001
            return _error(e, "compile", "constructor")
        return {"ok": True}

    def run_block(self, msg: dict) -> dict:
        """A block's calls back to back, stopping at the first that fails; on cuda one synchronize after the last
        (a courtesy only: the supervisor fences the process itself)."""
        calls = msg.get("calls") or []
        dones = []
        for c in calls:
            dones.append(self.call(c))
            if "error" in dones[-1]:
                break
        if self.device.type == "cuda" and dones and "error" not in dones[-1]:
            try:
                torch.cuda.synchronize(self.device)
            except BaseException as e:  # noqa: BLE001 - the candidate's kernels faulted: data
                dones[-1] = _error(e, "runtime", "forward")
        return {"type": "dones", "dones": dones}

    def call(self, msg: dict) -> dict:
        place = self.places.tensor
        inputs = [place(x) if isinstance(x, list) else x["value"] for x in msg["inputs"]]
        places = msg["outputs"]
        try:
            with torch.no_grad():
                out = self.model(*inputs)
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            claims = [self._store(outs[i] if i < len(outs) else None, p) for i, p in enumerate(places)]
            if len(outs) != len(places):
                claims.append(["count", f"returned {len(outs)} outputs, expected {len(places)}"])
        except BaseException as e:  # noqa: BLE001 - anything the candidate raised is data
            return _error(e, "runtime", "forward")
        return {"claims": claims}

    def _store(self, o, place: list):
        offset, dtype, shape = place
        if type(o) is not torch.Tensor or o.device.type != self.device.type or o.layout != torch.strided:
            return ["type", f"{type(o).__module__}.{type(o).__qualname__}"
                    + (f" on {o.device.type}" if isinstance(o, torch.Tensor) else "")]
        if o.dtype != DTYPES[dtype]:
            return ["dtype", str(o.dtype).removeprefix("torch.")]
        if tuple(o.shape) != tuple(shape):
            return ["shape", str(list(o.shape))]
        if offset >= 0:  # a lent place (the CPU): copied there
            self.places.tensor(place).copy_(o)
            return None
        if self.deliver == "none":  # a trusted baseline on cuda: nobody reads its outputs, as no workload copies them
            return None
        if not o.numel():
            return ["lent", 0]  # nothing to read
        if not o.is_contiguous():
            o = o.contiguous()  # the one copy an output in place can need: the candidate's own layout choice
        base = self.raw.data_ptr()
        if base <= o.data_ptr() < base + self.raw.numel():  # an output lying in lent memory (a view of an input)
            return ["lent", o.data_ptr() - base]
        from kbenv.sandbox import devshare
        try:
            handle, off, _ = devshare.export_ipc(o.data_ptr())
        except devshare.DevShareError as e:
            return ["type", f"an output in memory that cannot be shared ({e}): allocate outputs with torch"]
        self.kept[offset] = o  # alive until this place's next call (the supervisor reads it after the fence)
        return ["ipc", handle, off]

    def serve(self) -> None:
        while True:
            msg = wire.read_frame(self.fd_in)
            kind = msg.get("type")
            if kind == "exit":
                return
            if kind == "setup":
                reply = self.setup(msg)
                reply["type"] = "reply"
            elif kind == "block":
                reply = self.run_block(msg)
            else:
                return
            wire.write_frame(self.fd_out, reply)


def main(argv=None) -> int:
    argv = argv or sys.argv[1:]
    fd_in, fd_out, memfd = (int(a) for a in argv[:3])
    sock = None
    if len(argv) > 3:
        import socket
        sock = socket.socket(fileno=int(argv[3]))
    dev = os.environ.get("KBENV_WORKER_DEVICE", "")
    warm_compile = os.environ.get("KBENV_TRUSTED_PREIMPORT") == "1"  # set for torch.compile baseline processes only
    ieee_fp32()  # baselines compute fp32 as the references do; a candidate's own torch calls start so too
    try:
        if warm_compile:
            import importlib  # (an `import torch.x` here would make `torch` local to main)
            importlib.import_module("torch._dynamo")  # torch.compile's imports, before the process is needed
            importlib.import_module("torch._inductor.compile_fx")
        if dev.startswith("cuda"):
            # A spare waits with its imports done and touches the GPU only once the supervisor says so, never
            # while another candidate is timed.
            if wire.read_frame(fd_in).get("type") != "start":
                return 3
            torch.cuda.init()
            torch.empty(1, device=dev)
            if warm_compile:  # a process's first torch.compile pays one-time set-up: pay it now, on a tiny graph
                torch.compile(lambda x: x * 2 + 1)(torch.ones(8, device=dev))
        wire.write_frame(fd_out, {"type": "ready", "pid_ns": os.readlink("/proc/self/ns/pid"), "uid": os.getuid()})
        Executor(fd_in, fd_out, memfd, sock).serve()
    except (wire.ChannelClosed, wire.ChannelTimeout, OSError):
        import traceback
        traceback.print_exc()
        return 3
    return 0


if __name__ == "__main__":
    os._exit(main())

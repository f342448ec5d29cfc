#!/usr/bin/env python3
"""One-shot GPU spike for issues 11 and 12: measures the facts the trusted-measurement design rests on.

Run as root on the CUDA host (it degrades to what it can do elsewhere). bwrap is taken from PATH (a bwrap
that an unprivileged uid must run belongs outside /root, e.g. /usr/local/bin)::

    python3 benchmarks/fence_spike.py --out $OUT/spike.json

Parts, each in its own try/except with its own time budget; results are written after every figure:

- ``env``: host, driver, /dev/nvidia*, gcc, user-namespace knobs, the checkpoint structs in the CUDA headers.
- ``sandbox``: cgroup v2 (writable? memory.max enforced?), RLIMIT_DATA/RLIMIT_AS with CUDA, bubblewrap with
  CUDA as root / as host uid 65534 / with only the nvidia device nodes and a private /dev/shm.
- ``lock``: the driver's process lock (cuCheckpointProcessLock/Unlock/GetState) on a child that has work queued
  and replied before synchronizing; its cost on an idle child; inside bubblewrap; under another host uid; against
  a SIGSTOPped child, a child that blocks signals, a child with a spinning Python thread.
- ``pipe``: msgpack round trip parent -> child -> parent, without and with torch.cuda.synchronize, and with a
  lock+unlock fence per call.
- ``copy``: device-to-device copy bandwidth at 1 MiB .. 6 GiB.
- ``ipc``: legacy CUDA IPC of a parent buffer into a child (plain and sandboxed): can a child write into lent
  memory, and at what cost.

Nothing here is imported by kbenv.
"""
from __future__ import annotations

import argparse
import ctypes
import faulthandler
import glob
import json
import os
import platform
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

try:
    if os.environ.get("KBSPIKE_CODEC") == "json":
        raise ImportError("json forced")
    import msgpack

    _pack, _unpack = msgpack.packb, msgpack.unpackb
    CODEC = "msgpack"
except ImportError:  # pragma: no cover - degraded mode
    _pack, _unpack = (lambda o: json.dumps(o).encode()), json.loads
    CODEC = "json"

RESULTS: dict = {}
OUT_PATH = "spike.json"
T_START = time.monotonic()
DEADLINE = T_START + 320.0
CHILDREN: list = []  # Popen objects still to reap
_lock = threading.Lock()
_counter = [0]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# --------------------------------------------------------------------------------------------------- results


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T_START:7.2f}s] {msg}", flush=True)


def dump() -> None:
    tmp = OUT_PATH + ".tmp"
    with open(tmp, "w") as f:
        json.dump(RESULTS, f, indent=1, default=repr, sort_keys=False)
    os.replace(tmp, OUT_PATH)


def record(key: str, value) -> None:
    with _lock:
        RESULTS[key] = value
        try:
            dump()
        except Exception as e:  # noqa: BLE001
            print("dump failed", e, flush=True)
    text = json.dumps(value, default=repr)
    log(f"{key} = {text[:1500]}{' ...' if len(text) > 1500 else ''}")


def stats_us(xs_s: list) -> dict:
    if not xs_s:
        return {}
    xs = sorted(x * 1e6 for x in xs_s)
    n = len(xs)
    return {
        "n": n,
        "median_us": round(statistics.median(xs), 2),
        "p99_us": round(xs[min(n - 1, int(0.99 * n))], 2),
        "max_us": round(xs[-1], 2),
        "min_us": round(xs[0], 2),
        "mean_us": round(statistics.fmean(xs), 2),
    }


def run_part(name: str, fn, budget_s: float) -> None:
    """Runs fn in a thread; records its error or its timeout; kills the children it left behind."""
    remaining = DEADLINE - time.monotonic()
    if remaining < 5:
        record(f"{name}.skipped", f"global deadline: {remaining:.1f}s left")
        return
    budget = min(budget_s, remaining)
    log(f"=== part {name} (budget {budget:.0f}s)")
    before = len(CHILDREN)
    box: dict = {}

    def body():
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            box["err"] = f"{type(e).__name__}: {e}"
            box["tb"] = traceback.format_exc()

    t0 = time.monotonic()
    th = threading.Thread(target=body, daemon=True, name=name)
    th.start()
    th.join(budget)
    if th.is_alive():
        record(f"{name}.timeout", f"part still running after {budget:.0f}s; moved on")
        faulthandler.dump_traceback(all_threads=True)
    elif "err" in box:
        record(f"{name}.error", box["err"])
        print(box["tb"], flush=True)
    for p in CHILDREN[before:]:
        kill_child(p)
    record(f"{name}.wall_s", round(time.monotonic() - t0, 2))


# ---------------------------------------------------------------------------------------------- frames


def send(fd: int, obj) -> None:
    b = _pack(obj)
    os.write(fd, struct.pack("<I", len(b)) + b)


def _readn(fd: int, n: int, deadline: float) -> bytes:
    buf = b""
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no reply within the deadline ({len(buf)}/{n} bytes)")
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            continue
        c = os.read(fd, n - len(buf))
        if not c:
            raise EOFError("child closed its pipe")
        buf += c
    return buf


def recv(fd: int, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    (n,) = struct.unpack("<I", _readn(fd, 4, deadline))
    return _unpack(_readn(fd, n, deadline))


# ----------------------------------------------------------------------------------------------- child

CHILD_SRC = r'''
import os, sys, struct, time, threading, signal, json
T0 = time.monotonic()
mode = sys.argv[2] if len(sys.argv) > 2 else ""
if "sigblock" in mode:
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP})
if os.environ.get("KBSPIKE_RLIMIT_DATA") or os.environ.get("KBSPIKE_RLIMIT_AS"):
    import resource
    if os.environ.get("KBSPIKE_RLIMIT_DATA"):
        n = int(os.environ["KBSPIKE_RLIMIT_DATA"]); resource.setrlimit(resource.RLIMIT_DATA, (n, n))
    if os.environ.get("KBSPIKE_RLIMIT_AS"):
        n = int(os.environ["KBSPIKE_RLIMIT_AS"]); resource.setrlimit(resource.RLIMIT_AS, (n, n))
rfd, wfd = map(int, os.environ["KBSPIKE_FDS"].split(","))
try:
    if os.environ.get("KBSPIKE_CODEC") == "json":
        raise ImportError("json forced")
    import msgpack
    pack, unpack = msgpack.packb, msgpack.unpackb
except ImportError:
    pack, unpack = (lambda o: json.dumps(o).encode()), json.loads
def send(o):
    b = pack(o); os.write(wfd, struct.pack("<I", len(b)) + b)
def readn(n):
    buf = b""
    while len(buf) < n:
        c = os.read(rfd, n - len(buf))
        if not c:
            os._exit(0)
        buf += c
    return buf
def recv():
    (n,) = struct.unpack("<I", readn(4)); return unpack(readn(n))
info = {"pid": os.getpid(), "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "mode": mode}
for k, path in (("uid_map", "/proc/self/uid_map"), ("gid_map", "/proc/self/gid_map"), ("cgroup", "/proc/self/cgroup")):
    try:
        info[k] = open(path).read().strip()
    except Exception as e:
        info[k] = "ERR " + repr(e)
try:
    with open("/etc/shadow") as f:
        info["etc_shadow_readable"] = "YES (%d bytes read)" % len(f.read())
except Exception as e:
    info["etc_shadow_readable"] = "no: " + repr(e)
try:
    p = "/dev/shm/kbspike_%s_%d" % (mode.replace("/", "_"), os.getpid())
    with open(p, "w") as f:
        f.write("x")
    info["devshm_written"] = p
except Exception as e:
    info["devshm_written"] = "ERR " + repr(e)
try:
    info["dev"] = sorted(os.listdir("/dev"))
except Exception as e:
    info["dev"] = "ERR " + repr(e)
try:
    import resource
    info["rlimit_data"] = resource.getrlimit(resource.RLIMIT_DATA)
    info["rlimit_as"] = resource.getrlimit(resource.RLIMIT_AS)
except Exception as e:
    info["rlimit"] = repr(e)
t = time.monotonic()
try:
    import torch
    info["torch"] = torch.__version__
except Exception as e:
    torch = None
    info["torch_error"] = repr(e)
info["torch_import_s"] = round(time.monotonic() - t, 3)
if os.environ.get("KBSPIKE_FAKE"):  # CPU self-test of the parent's logic: a stand-in for torch.cuda
    import types
    _busy = [0.0]
    def _sleep(c):
        _busy[0] = max(_busy[0], time.monotonic()) + c / 1e9
    def _sync():
        time.sleep(max(0.0, _busy[0] - time.monotonic()))
    class _Ev:
        def __init__(self, *a, **k):
            self.t = 0.0
        def record(self):
            self.t = _busy[0]
        def query(self):
            return time.monotonic() >= self.t
        def synchronize(self):
            time.sleep(max(0.0, self.t - time.monotonic()))
    class _T:
        def __init__(self, v):
            self.v = v
        def sum(self):
            return self.v
    torch = types.SimpleNamespace(__version__="fake", uint8=None, float32=None,
                                  cuda=types.SimpleNamespace(_sleep=_sleep, synchronize=_sync, Event=_Ev),
                                  zeros=lambda *a, **k: _T(0), arange=lambda n, **k: _T(n * (n - 1) / 2),
                                  ones=lambda n, **k: bytearray(b"\x01") * n)
cuda = False
t = time.monotonic()
if torch is not None:
    try:
        _x = torch.zeros(1, device="cuda"); torch.cuda.synchronize(); cuda = True
    except Exception as e:
        info["cuda_error"] = repr(e)[:2000]
info["cuda_ok"] = cuda
info["cuda_init_s"] = round(time.monotonic() - t, 3)
def host_alloc(nbytes):
    t = time.monotonic()
    try:
        if torch is not None:
            a = torch.ones(nbytes, dtype=torch.uint8)  # written, so resident
            ok = int(a[-1]) == 1
            del a
        else:
            a = bytearray(b"\x01") * nbytes
            ok = a[-1] == 1
            del a
        return {"ok": ok, "s": round(time.monotonic() - t, 3)}
    except BaseException as e:
        return {"ok": False, "error": repr(e)[:500], "s": round(time.monotonic() - t, 3)}
info["startup_s"] = round(time.monotonic() - T0, 3)
send(info)
ev = None
stop = [False]
threads = []
def spin():
    x = 0
    while not stop[0]:
        x += 1
def mm_loop(n):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    while not stop[0]:
        for _ in range(4):
            c = a @ b
        torch.cuda.synchronize()
def launcher(cycles):
    while not stop[0]:
        torch.cuda._sleep(cycles)
        e = torch.cuda.Event(); e.record(); e.synchronize()
cu = None
def libcuda():
    global cu
    if cu is None:
        import ctypes
        cu = ctypes.CDLL("libcuda.so.1")
    return cu
while True:
    m = recv()
    op = m.get("op")
    try:
        if op == "noop":
            send({"ok": 1})
        elif op == "sync":
            torch.cuda.synchronize(); send({"ok": 1})
        elif op == "calib":
            torch.cuda._sleep(1000); torch.cuda.synchronize()
            t = time.monotonic(); torch.cuda._sleep(int(m["cycles"])); torch.cuda.synchronize()
            send({"s": time.monotonic() - t})
        elif op == "sleep":
            t = time.monotonic()
            torch.cuda._sleep(int(m["cycles"]))
            ev = torch.cuda.Event(); ev.record()
            send({"t_before_launch": t, "t_after_launch": time.monotonic()})
        elif op == "query":
            t = time.monotonic(); q = ev.query()
            send({"done": bool(q), "t": t, "t_after": time.monotonic()})
        elif op == "check":
            t = time.monotonic()
            a = torch.arange(1000, device="cuda", dtype=torch.float32)
            s = float(a.sum())
            send({"ok": s == 499500.0, "t_start": t, "t_end": time.monotonic()})
        elif op == "spin_thread":
            stop[0] = False
            th = threading.Thread(target=spin, daemon=True); th.start(); threads.append(th)
            send({"ok": 1})
        elif op == "launch_thread":
            stop[0] = False
            th = threading.Thread(target=launcher, args=(int(m["cycles"]),), daemon=True); th.start(); threads.append(th)
            send({"ok": 1})
        elif op == "mm_thread":
            stop[0] = False
            th = threading.Thread(target=mm_loop, args=(int(m["n"]),), daemon=True); th.start(); threads.append(th)
            send({"ok": 1})
        elif op == "selfstop":
            send({"ok": 1}); os.kill(os.getpid(), signal.SIGSTOP)
            send({"resumed": time.monotonic()})
        elif op == "stop_threads":
            stop[0] = True
            for th in threads:
                th.join(30)
            alive = sum(th.is_alive() for th in threads)
            threads.clear()
            send({"ok": 1, "alive": alive})
        elif op == "ipc_write":
            import ctypes
            lib = libcuda()
            class H(ctypes.Structure):
                _fields_ = [("reserved", ctypes.c_char * 64)]
            h = H(); ctypes.memmove(ctypes.byref(h), bytes(m["handle"]), 64)
            dptr = ctypes.c_uint64(0)
            t = time.monotonic()
            rc = lib.cuIpcOpenMemHandle_v2(ctypes.byref(dptr), h, ctypes.c_uint(1))
            t_open = time.monotonic() - t
            if rc != 0:
                send({"ok": False, "open_rc": rc}); continue
            n = int(m["nbytes"])
            src = torch.full((n,), int(m["value"]), dtype=torch.uint8, device="cuda")
            torch.cuda.synchronize()
            dst = dptr.value + int(m["offset"])
            times = []
            for _ in range(int(m.get("reps", 5))):
                t = time.monotonic()
                rc2 = lib.cuMemcpyDtoD_v2(ctypes.c_uint64(dst), ctypes.c_uint64(src.data_ptr()), ctypes.c_size_t(n))
                rc3 = lib.cuCtxSynchronize()
                times.append(time.monotonic() - t)
            rc4 = lib.cuIpcCloseMemHandle(ctypes.c_uint64(dptr.value))
            send({"ok": rc2 == 0 and rc3 == 0, "open_rc": rc, "copy_rc": rc2, "sync_rc": rc3, "close_rc": rc4,
                  "open_s": t_open, "copy_s": times})
        elif op == "alloc":
            send(host_alloc(int(m["bytes"])))
        elif op == "exit":
            send({"ok": 1}); os._exit(0)
        else:
            send({"error": "unknown op %r" % op})
    except Exception as e:
        send({"error": repr(e)[:1000]})
'''


class Child:
    def __init__(self, p, wfd, rfd, token, errpath, label):
        self.p, self.wfd, self.rfd, self.token, self.errpath, self.label = p, wfd, rfd, token, errpath, label
        self.info: dict = {}
        self.host_pid: int | None = None

    def call(self, msg, timeout=60.0):
        send(self.wfd, msg)
        return recv(self.rfd, timeout)

    def stderr_tail(self, n=1500) -> str:
        try:
            with open(self.errpath, errors="replace") as f:
                return f.read()[-n:]
        except OSError as e:
            return repr(e)


def kill_child(c) -> None:
    p = c.p if isinstance(c, Child) else c
    if p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGCONT)
    except OSError:
        pass
    for sig in (signal.SIGKILL,):
        try:
            os.killpg(p.pid, sig)
        except OSError:
            try:
                p.send_signal(sig)
            except OSError:
                pass
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        pass


BWRAP: list | None = None  # how to invoke bwrap (resolved in env part)


def resolve_bwrap() -> list | None:
    exe = shutil.which("bwrap") or os.path.join(REPO, ".bw/root/usr/bin/bwrap")
    if not os.path.exists(exe):
        return None
    for cmd in ([exe], None):
        if cmd is None:
            libdir = "/usr/local/lib/kbbw" if os.path.isdir("/usr/local/lib/kbbw") else os.path.join(REPO, ".bw/lib")
            ld = "/lib64/ld-linux-x86-64.so.2"
            cmd = [ld, "--library-path", libdir, exe]
        try:
            r = subprocess.run(cmd + ["--version"], capture_output=True, text=True, timeout=10)
            if r.returncode == 0:
                return cmd
            record(f"env.bwrap_try_{len(cmd)}", (r.returncode, r.stdout[-300:], r.stderr[-300:]))
        except Exception as e:  # noqa: BLE001
            record(f"env.bwrap_try_{len(cmd)}", repr(e))
    return None


def nvidia_nodes() -> list:
    nodes = sorted(p for p in glob.glob("/dev/nvidia*"))
    return nodes


def bwrap_args(dev: str) -> list:
    a = ["--ro-bind", "/", "/"]
    if dev == "devbind":
        a += ["--dev-bind", "/dev", "/dev"]
    else:  # nvonly
        a += ["--dev", "/dev"]
        for n in nvidia_nodes():
            a += ["--dev-bind", n, n]
        a += ["--tmpfs", "/dev/shm"]
    a += ["--proc", "/proc", "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent", "--new-session",
          "--cap-drop", "ALL"]
    return a


def spawn(mode: str = "", *, uid: int | None = None, bwrap: str | None = None, env_extra: dict | None = None,
          cgroup: str | None = None, timeout: float = 90.0) -> Child:
    """Starts a child; returns once it has sent its info frame (or raises, with its stderr)."""
    with _lock:
        _counter[0] += 1
        token = f"KBSPIKE_CHILD_{os.getpid()}_{_counter[0]}"
    r1, w1 = os.pipe()  # parent -> child
    r2, w2 = os.pipe()  # child -> parent
    env = dict(os.environ, KBSPIKE_FDS=f"{r1},{w2}", HOME="/tmp", PYTHONUNBUFFERED="1")
    env.update(env_extra or {})
    cmd = [sys.executable, "-c", CHILD_SRC, token, mode]
    if bwrap:
        if BWRAP is None:
            raise RuntimeError("bwrap not available")
        cmd = BWRAP + bwrap_args(bwrap) + ["--"] + cmd
    if cgroup:
        cmd = ["/bin/sh", "-c", f'echo $$ > {cgroup}/cgroup.procs && exec "$@"', "sh"] + cmd
    fd, errpath = tempfile.mkstemp(prefix="kbspike_err_")
    kw = {}
    if uid is not None:
        kw = {"user": uid, "group": uid, "extra_groups": []}
        os.chmod(errpath, 0o666)
    try:
        p = subprocess.Popen(cmd, env=env, pass_fds=(r1, w2), stdin=subprocess.DEVNULL, stdout=fd, stderr=fd,
                             start_new_session=True, cwd="/", **kw)
    except OSError as e:
        for x in (fd, r1, w1, r2, w2):
            os.close(x)
        raise RuntimeError(f"spawn {mode} uid={uid} bwrap={bwrap}: Popen failed: {e!r} (exe {cmd[0]})") from e
    os.close(fd)
    os.close(r1)
    os.close(w2)
    CHILDREN.append(p)
    c = Child(p, w1, r2, token, errpath, f"{mode}|uid={uid}|bwrap={bwrap}")
    try:
        c.info = recv(r2, timeout)
    except Exception as e:
        kill_child(p)
        raise RuntimeError(f"child {c.label} gave no info frame: {e!r}; rc={p.poll()}; stderr: {c.stderr_tail()}")
    c.host_pid = find_host_pid(c)
    return c


def find_host_pid(c: Child) -> int | None:
    """The host pid of the python child (bwrap puts one or two bwrap processes above it)."""
    cands = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if c.token.encode() not in argv:
                continue
            with open(f"/proc/{d}/comm") as f:
                comm = f.read().strip()
            if comm in ("bwrap", "sh", "ld-linux-x86-64"):
                continue
            cands.append(int(d))
        except OSError:
            continue
    if len(cands) != 1:
        log(f"host pid candidates for {c.label}: {cands}")
    if not cands:
        return None
    pid = max(cands)
    try:
        with open(f"/proc/{pid}/status") as f:
            ns = [l for l in f if l.startswith("NSpid")]
        c.info["host_NSpid"] = ns[0].strip() if ns else None
        with open(f"/proc/{pid}/status") as f:
            c.info["host_view_Uid"] = [l.split()[1:] for l in f if l.startswith("Uid:")][0]
    except OSError:
        pass
    return pid


def stop_child(c: Child) -> None:
    try:
        c.call({"op": "exit"}, 5)
    except Exception:  # noqa: BLE001
        pass
    try:
        c.p.wait(5)
    except subprocess.TimeoutExpired:
        kill_child(c)
    for fd in (c.wfd, c.rfd):
        try:
            os.close(fd)
        except OSError:
            pass


def brief_info(c: Child) -> dict:
    keep = ("pid", "uid", "euid", "gid", "uid_map", "gid_map", "etc_shadow_readable", "devshm_written", "cuda_ok",
            "cuda_error", "torch_error", "torch_import_s", "cuda_init_s", "startup_s", "rlimit_data", "rlimit_as",
            "host_NSpid", "host_view_Uid", "cgroup")
    d = {k: c.info.get(k) for k in keep if k in c.info}
    d.update({k: v for k, v in c.info.items() if k.startswith("alloc_")})
    d["host_pid"] = c.host_pid
    if isinstance(c.info.get("dev"), list):
        d["dev_count"] = len(c.info["dev"])
        d["dev_nvidia"] = [x for x in c.info["dev"] if x.startswith("nvidia")]
        d["dev_has_shm"] = "shm" in c.info["dev"]
    return d


# ------------------------------------------------------------------------------------------ driver API

CU_STATES = {0: "RUNNING", 1: "LOCKED", 2: "CHECKPOINTED", 3: "FAILED"}


class LockArgs(ctypes.Structure):  # CUcheckpointLockArgs_st, cuda.h 13.0
    _fields_ = [("timeoutMs", ctypes.c_uint), ("reserved0", ctypes.c_uint), ("reserved1", ctypes.c_uint64 * 7)]


class UnlockArgs(ctypes.Structure):  # CUcheckpointUnlockArgs_st, cuda.h 13.0
    _fields_ = [("reserved", ctypes.c_uint64 * 8)]


class Driver:
    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.rc_init = self.lib.cuInit(0)
        v = ctypes.c_int(0)
        self.lib.cuDriverGetVersion(ctypes.byref(v))
        self.version = v.value
        self.has = {}
        for name in ("cuCheckpointProcessLock", "cuCheckpointProcessUnlock", "cuCheckpointProcessGetState",
                     "cuCheckpointProcessCheckpoint", "cuCheckpointProcessGetRestoreThreadId"):
            try:
                getattr(self.lib, name)
                self.has[name] = True
            except AttributeError:
                self.has[name] = False
        if self.has["cuCheckpointProcessLock"]:
            self.lib.cuCheckpointProcessLock.argtypes = [ctypes.c_int, ctypes.POINTER(LockArgs)]
            self.lib.cuCheckpointProcessUnlock.argtypes = [ctypes.c_int, ctypes.POINTER(UnlockArgs)]
            self.lib.cuCheckpointProcessGetState.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
            self.lib.cuCheckpointProcessGetRestoreThreadId.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]

    def err(self, rc: int) -> str:
        if rc == 0:
            return "CUDA_SUCCESS"
        s = ctypes.c_char_p()
        try:
            self.lib.cuGetErrorName(rc, ctypes.byref(s))
            return f"{s.value.decode() if s.value else '?'}({rc})"
        except Exception:  # noqa: BLE001
            return str(rc)

    def lock(self, pid: int, timeout_ms: int = 0):
        a = LockArgs()
        a.timeoutMs = timeout_ms
        t = time.perf_counter()
        rc = self.lib.cuCheckpointProcessLock(pid, ctypes.byref(a))
        return rc, time.perf_counter() - t

    def unlock(self, pid: int):
        a = UnlockArgs()
        t = time.perf_counter()
        rc = self.lib.cuCheckpointProcessUnlock(pid, ctypes.byref(a))
        return rc, time.perf_counter() - t

    def state(self, pid: int) -> str:
        s = ctypes.c_int(-1)
        rc = self.lib.cuCheckpointProcessGetState(pid, ctypes.byref(s))
        return CU_STATES.get(s.value, str(s.value)) if rc == 0 else f"rc={self.err(rc)}"

    def restore_tid(self, pid: int):
        t = ctypes.c_int(-1)
        rc = self.lib.cuCheckpointProcessGetRestoreThreadId(pid, ctypes.byref(t))
        return t.value if rc == 0 else f"rc={self.err(rc)}"


DRV: Driver | None = None


def timed_call(fn, *args, limit: float = 10.0):
    """Runs fn(*args) in a daemon thread (a ctypes call releases the GIL); ('HUNG', limit) if it does not return."""
    box = {}

    def body():
        try:
            box["r"] = fn(*args)
        except Exception as e:  # noqa: BLE001
            box["e"] = repr(e)

    th = threading.Thread(target=body, daemon=True)
    t = time.perf_counter()
    th.start()
    th.join(limit)
    if th.is_alive():
        return ("HUNG", time.perf_counter() - t)
    if "e" in box:
        return ("EXC " + box["e"], time.perf_counter() - t)
    return box["r"]


def lock_rc(pid, timeout_ms, limit):
    r = timed_call(DRV.lock, pid, timeout_ms, limit=limit)
    rc, dt = r
    return (DRV.err(rc) if isinstance(rc, int) else rc), dt


# ----------------------------------------------------------------------------------------------- parts


def part_env():
    global BWRAP
    info = {"python": sys.version.split()[0], "executable": sys.executable, "uname": platform.uname()._asdict(),
            "euid": os.geteuid(), "cpus": os.cpu_count(), "codec": CODEC}
    try:
        info["proc_version"] = open("/proc/version").read().strip()
    except OSError as e:
        info["proc_version"] = repr(e)
    for k in ("/proc/sys/kernel/unprivileged_userns_clone", "/proc/sys/user/max_user_namespaces",
              "/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "/proc/sys/kernel/yama/ptrace_scope",
              "/proc/sys/kernel/unprivileged_bpf_disabled"):
        try:
            info[k] = open(k).read().strip()
        except OSError as e:
            info[k] = f"absent ({e.strerror})"
    record("env.host", info)
    devs = {}
    for n in nvidia_nodes():
        try:
            st = os.stat(n)
            devs[n] = {"mode": oct(st.st_mode), "uid": st.st_uid, "gid": st.st_gid,
                       "rdev": f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}" if st.st_rdev else None,
                       "isdir": os.path.isdir(n)}
        except OSError as e:
            devs[n] = repr(e)
    for n in glob.glob("/dev/nvidia-caps/*"):
        devs[n] = oct(os.stat(n).st_mode)
    record("env.dev_nvidia", devs)
    for name, cmd in (("gcc", ["gcc", "--version"]), ("nvidia_smi", ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,persistence_mode,compute_mode", "--format=csv"]),
                      ("nvcc", ["nvcc", "--version"]), ("ldd_version", ["ldd", "--version"]),
                      ("os_release", ["cat", "/etc/os-release"])):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
            record(f"env.{name}", (r.returncode, (r.stdout + r.stderr).strip()[:800]))
        except Exception as e:  # noqa: BLE001
            record(f"env.{name}", repr(e))
    # the structs, as the installed headers define them
    headers = sorted(set(glob.glob("/usr/local/cuda*/include/cuda.h") + glob.glob("/usr/local/cuda*/targets/*/include/cuda.h")
                         + glob.glob("/usr/include/cuda.h")))
    try:
        import nvidia  # noqa: F401

        for base in nvidia.__path__:
            headers += glob.glob(os.path.join(base, "*/include/cuda.h"))
    except Exception:  # noqa: BLE001
        pass
    found = {}
    for h in headers[:6]:
        try:
            text = open(h, errors="replace").read()
        except OSError:
            continue
        snippet = []
        for key in ("typedef struct CUcheckpointLockArgs_st", "typedef struct CUcheckpointUnlockArgs_st",
                    "typedef enum CUprocessState_enum"):
            i = text.find(key)
            if i >= 0:
                j = text.find("}", i)
                snippet.append(text[i:text.find(";", j) + 1])
        for fn in ("cuCheckpointProcessLock(", "cuCheckpointProcessUnlock(", "cuCheckpointProcessGetState("):
            i = text.find("CUresult CUDAAPI " + fn)
            if i >= 0:
                snippet.append(text[i:text.find(";", i) + 1])
        vi = text.find("#define CUDA_VERSION ")
        found[h] = {"cuda_version": text[vi:text.find("\n", vi)] if vi >= 0 else None, "decls": snippet}
    record("env.cuda_h_checkpoint_decls", found or "no cuda.h found")
    record("env.ctypes_sizes", {"LockArgs": ctypes.sizeof(LockArgs), "UnlockArgs": ctypes.sizeof(UnlockArgs),
                                "LockArgs.timeoutMs_offset": LockArgs.timeoutMs.offset,
                                "LockArgs.reserved1_offset": LockArgs.reserved1.offset})
    BWRAP = resolve_bwrap()
    record("env.bwrap", BWRAP)


def other_access(paths: list) -> dict:
    """For uid 65534 children: which directories on the way to the interpreter and torch lack o+x; fixes them."""
    fixed, blocked = [], []
    for p in paths:
        p = os.path.realpath(p)
        parts = p.split("/")
        for i in range(2, len(parts) + 1):
            d = "/".join(parts[:i]) or "/"
            if not os.path.isdir(d):
                continue
            m = os.stat(d).st_mode
            if not m & 0o001:
                blocked.append(d)
                try:
                    os.chmod(d, m | 0o001)
                    fixed.append(d)
                except OSError as e:
                    fixed.append(f"{d}: {e!r}")
    return {"paths": [os.path.realpath(p) for p in paths], "lacked_o+x": sorted(set(blocked)), "chmod_o+x": sorted(set(fixed))}


def part_access():
    paths = [sys.executable]
    try:
        import importlib.util

        for mod in ("torch", "msgpack"):
            spec = importlib.util.find_spec(mod)
            if spec and spec.origin:
                paths.append(os.path.dirname(spec.origin))
    except Exception:  # noqa: BLE001
        pass
    import sysconfig

    paths.append(sysconfig.get_paths()["stdlib"])
    record("env.uid65534_access", other_access(paths))


class FakeDriver:
    """KBSPIKE_FAKE=1: exercises the parent's logic on a machine without CUDA."""

    has = {"cuCheckpointProcessLock": True, "cuCheckpointProcessUnlock": True, "cuCheckpointProcessGetState": True}
    rc_init, version, lib = 0, 0, None

    def __init__(self):
        self.locked: set = set()

    def err(self, rc):
        return "CUDA_SUCCESS" if rc == 0 else f"ERR({rc})"

    def lock(self, pid, timeout_ms=0):
        self.locked.add(pid)
        return 0, 1e-5

    def unlock(self, pid):
        self.locked.discard(pid)
        return 0, 1e-5

    def state(self, pid):
        return "LOCKED" if pid in self.locked else "RUNNING"

    def restore_tid(self, pid):
        return -1


def part_driver():
    global DRV
    if os.environ.get("KBSPIKE_FAKE"):
        DRV = FakeDriver()
        record("driver", "FAKE")
        return
    DRV = Driver()
    record("driver", {"cuInit": DRV.err(DRV.rc_init), "driver_version": DRV.version, "symbols": DRV.has,
                      "state_of_self": DRV.state(os.getpid()) if DRV.has["cuCheckpointProcessGetState"] else None,
                      "state_of_pid1": DRV.state(1) if DRV.has["cuCheckpointProcessGetState"] else None})


def part_torch_parent():
    import torch

    t = time.monotonic()
    ok = torch.cuda.is_available()
    info = {"torch": torch.__version__, "cuda_available": ok}
    if ok:
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        p = torch.cuda.get_device_properties(0)
        info.update(name=p.name, sms=p.multi_processor_count, total_mem_gib=round(p.total_memory / 2**30, 1),
                    l2_mb=getattr(p, "L2_cache_size", 0) / 1e6, init_s=round(time.monotonic() - t, 2))
    record("parent_torch", info)


# ---- sandbox facts (issue 12)


def _w(path, text):
    with open(path, "w") as f:
        f.write(text)


def part_cgroup():
    res = {}
    try:
        mounts = [l.strip() for l in open("/proc/self/mounts") if "cgroup" in l]
    except OSError as e:
        mounts = repr(e)
    res["mounts"] = mounts
    root = "/sys/fs/cgroup"
    for f in ("cgroup.controllers", "cgroup.subtree_control", "cgroup.type", "memory.max"):
        try:
            res[f] = open(os.path.join(root, f)).read().strip()
        except OSError as e:
            res[f] = f"ERR {e!r}"
    for k, fn in (("self_cgroup", lambda: open("/proc/self/cgroup").read().strip()),
                  ("root_procs_count", lambda: len(open(os.path.join(root, "cgroup.procs")).read().split()))):
        try:
            res[k] = fn()
        except OSError as e:
            res[k] = repr(e)
    v2 = [l.split()[1] for l in mounts if isinstance(mounts, list) and l.split()[2] == "cgroup2"] if isinstance(mounts, list) else []
    res["cgroup2_mounts"] = v2
    if v2 and not os.path.exists(os.path.join(root, "cgroup.controllers")):
        root = v2[0]
        for f in ("cgroup.controllers", "cgroup.subtree_control"):
            try:
                res[f"{root}/{f}"] = open(os.path.join(root, f)).read().strip()
            except OSError as e:
                res[f"{root}/{f}"] = f"ERR {e!r}"
    record("sandbox.cgroup.facts", res)
    if not os.path.exists(os.path.join(root, "cgroup.controllers")):
        record("sandbox.cgroup.v2", False)
        return
    cg = os.path.join(root, "kbspike")
    steps = {}
    try:
        os.makedirs(cg, exist_ok=True)
        steps["mkdir"] = "ok"
    except OSError as e:
        steps["mkdir"] = repr(e)
        record("sandbox.cgroup.steps", steps)
        return
    steps["child_files_has_memory.max"] = os.path.exists(os.path.join(cg, "memory.max"))
    if not steps["child_files_has_memory.max"]:
        try:
            _w(os.path.join(root, "cgroup.subtree_control"), "+memory")
            steps["enable_memory"] = "ok"
        except OSError as e:
            steps["enable_memory"] = repr(e)
            # the no-internal-processes rule: move the root's processes into a leaf first (only when this
            # process lives in the root cgroup, i.e. no tooling of the host has put us anywhere)
            leaf = os.path.join(root, "kbspike_init")
            try:
                if res.get("self_cgroup", "").strip() != "0::/":
                    raise OSError(f"not in the root cgroup ({res.get('self_cgroup')!r}); not moving processes")
                os.makedirs(leaf, exist_ok=True)
                moved, failed = 0, 0
                for pid in open(os.path.join(root, "cgroup.procs")).read().split():
                    try:
                        _w(os.path.join(leaf, "cgroup.procs"), pid)
                        moved += 1
                    except OSError:
                        failed += 1
                steps["moved_root_procs_to_leaf"] = {"moved": moved, "failed": failed}
                _w(os.path.join(root, "cgroup.subtree_control"), "+memory")
                steps["enable_memory_after_move"] = "ok"
            except OSError as e2:
                steps["enable_memory_after_move"] = repr(e2)
        steps["child_files_has_memory.max_after"] = os.path.exists(os.path.join(cg, "memory.max"))
    try:
        _w(os.path.join(cg, "memory.max"), str(1 << 30))
        _w(os.path.join(cg, "memory.swap.max"), "0") if os.path.exists(os.path.join(cg, "memory.swap.max")) else None
        steps["write_memory.max_1GiB"] = open(os.path.join(cg, "memory.max")).read().strip()
    except OSError as e:
        steps["write_memory.max_1GiB"] = repr(e)
    record("sandbox.cgroup.steps", steps)
    # enforcement without CUDA: a plain python that writes 2 GiB in a 1 GiB cgroup
    try:
        code = "b = bytearray(b'\\x01') * (2 << 30); print('survived', len(b))"
        r = subprocess.run(["/bin/sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "sh", sys.executable, "-c", code],
                           capture_output=True, text=True, timeout=60)
        events = open(os.path.join(cg, "memory.events")).read().replace("\n", "; ") if os.path.exists(os.path.join(cg, "memory.events")) else None
        record("sandbox.cgroup.plain_2GiB_in_1GiB", {"rc": r.returncode, "out": (r.stdout + r.stderr)[-300:], "memory.events": events})
    except Exception as e:  # noqa: BLE001
        record("sandbox.cgroup.plain_2GiB_in_1GiB", repr(e))
    # with CUDA: memory.max 6 GiB; torch + cuda init + 2 GiB host must pass, then 10 GiB must be refused/killed
    try:
        _w(os.path.join(cg, "memory.max"), str(6 << 30))
        c = spawn("cgroup", cgroup=cg)
        d = alloc_probe(c)
        for f in ("memory.peak", "memory.current", "memory.events"):
            try:
                d[f] = open(os.path.join(cg, f)).read().strip().replace("\n", "; ")
            except OSError:
                pass
        stop_child(c)
        record("sandbox.cgroup.cuda_6GiB_cap", d)
    except Exception as e:  # noqa: BLE001
        record("sandbox.cgroup.cuda_6GiB_cap", f"{e!r}"[:2500])
    try:
        time.sleep(0.2)
        os.rmdir(cg)
        record("sandbox.cgroup.rmdir", "ok")
    except OSError as e:
        record("sandbox.cgroup.rmdir", repr(e))


def alloc_probe(c: Child) -> dict:
    """CUDA state of a limited child, then 2 GiB and 10 GiB of written host memory, then CUDA again."""
    d = brief_info(c)
    for label, n in (("host_2GiB", 2 << 30), ("host_10GiB", 10 << 30)):
        try:
            d[label] = c.call({"op": "alloc", "bytes": n}, 30)
        except Exception as e:  # noqa: BLE001
            d[label] = f"{e!r}; child rc={c.p.poll()}; stderr: {c.stderr_tail(400)}"
    if c.p.poll() is None:
        try:
            d["check_after"] = c.call({"op": "check"}, 20)
        except Exception as e:  # noqa: BLE001
            d["check_after"] = repr(e)
    d["child_rc"] = c.p.poll()
    return d


def part_rlimit():
    for label, extra in (("RLIMIT_DATA_8GiB", {"KBSPIKE_RLIMIT_DATA": str(8 << 30)}),
                         ("RLIMIT_AS_32GiB", {"KBSPIKE_RLIMIT_AS": str(32 << 30)})):
        try:
            c = spawn("rlimit", env_extra=extra)
            d = alloc_probe(c)
            stop_child(c)
            record(f"sandbox.rlimit.{label}", d)
        except Exception as e:  # noqa: BLE001
            record(f"sandbox.rlimit.{label}", repr(e)[:2500])


def part_bwrap_variants():
    variants = [("root_devbind", None, "devbind"), ("uid65534_plain", 65534, None),
                ("uid65534_devbind", 65534, "devbind"), ("uid65534_nvonly", 65534, "nvonly"), ("root_nvonly", None, "nvonly")]
    host_shm_before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    for label, uid, bw in variants:
        try:
            c = spawn(label, uid=uid, bwrap=bw)
            d = brief_info(c)
            try:
                d["check"] = c.call({"op": "check"}, 20)
            except Exception as e:  # noqa: BLE001
                d["check"] = repr(e)
            stop_child(c)
            if bw == "nvonly":
                d["dev_list"] = c.info.get("dev")
            record(f"sandbox.bwrap.{label}", d)
        except Exception as e:  # noqa: BLE001
            record(f"sandbox.bwrap.{label}", repr(e)[:2500])
    if os.path.isdir("/dev/shm"):
        new = sorted(set(os.listdir("/dev/shm")) - host_shm_before)
        record("sandbox.bwrap.host_devshm_new_files", new)
        for n in new:
            if n.startswith("kbspike_"):
                try:
                    os.unlink(os.path.join("/dev/shm", n))
                except OSError:
                    pass


# ---- the process lock (issue 11)

CYCLES_PER_S: float | None = None


def calibrate(c: Child) -> float:
    global CYCLES_PER_S
    if CYCLES_PER_S is None:
        c.call({"op": "calib", "cycles": int(2e8)}, 60)  # warm-up (clocks ramp)
        r = c.call({"op": "calib", "cycles": int(1e9)}, 60)
        CYCLES_PER_S = 1e9 / r["s"]
        record("lock.calib_sleep_cycles_per_s", round(CYCLES_PER_S))
    return CYCLES_PER_S


def lock_long_kernel(c: Child, label: str, seconds: float = 1.0) -> dict:
    """Child queues a ~`seconds` kernel and replies before synchronizing; parent locks at once."""
    pid = c.host_pid
    cycles = int(calibrate(c) * seconds)
    r = c.call({"op": "sleep", "cycles": cycles}, 30)
    t1 = time.monotonic()
    rc, dt = lock_rc(pid, 20000, 40)
    t2 = time.monotonic()
    d = {"kernel_expected_s": seconds, "lock_rc": rc, "lock_call_s": round(dt, 4),
         "lock_return_after_child_launch_s": round(t2 - r["t_after_launch"], 4),
         "lock_started_after_child_launch_s": round(t1 - r["t_after_launch"], 4),
         "state_while_locked": DRV.state(pid)}
    if rc == "CUDA_SUCCESS":
        # a CUDA call of the child must block while locked
        send(c.wfd, {"op": "query"})
        try:
            early = recv(c.rfd, 0.3)
            d["child_cuda_call_while_locked"] = f"RETURNED (not blocked): {early}"
        except TimeoutError:
            d["child_cuda_call_while_locked"] = "blocked (no reply within 0.3 s)"
            early = None
        t3 = time.monotonic()
        urc, udt = DRV.unlock(pid)
        d["unlock_rc"], d["unlock_s"] = DRV.err(urc), round(udt, 6)
        q = early or recv(c.rfd, 30)
        d["child_query_after_unlock"] = {"done": q["done"], "query_started_after_unlock_s": round(q["t"] - t3, 4)}
        d["waited_for_work"] = (t2 - r["t_after_launch"]) >= 0.9 * seconds
    d["state_after"] = DRV.state(pid)
    d["check_after"] = c.call({"op": "check"}, 30)
    record(f"lock.{label}.long_kernel", d)
    return d


def lock_timeout_vs_kernel(c: Child, label: str) -> None:
    """Lock with timeoutMs=300 while a 1.5 s kernel is queued: does the timeout bound the wait for the work?"""
    pid = c.host_pid
    cycles = int(calibrate(c) * 1.5)
    c.call({"op": "sleep", "cycles": cycles}, 30)
    rc, dt = lock_rc(pid, 300, 20)
    d = {"lock_rc": rc, "lock_call_s": round(dt, 4), "state_after_lock": DRV.state(pid)}
    if rc == "CUDA_SUCCESS":
        d["unlock_rc"] = DRV.err(DRV.unlock(pid)[0])
    d["check_after"] = c.call({"op": "check"}, 30)
    record(f"lock.{label}.timeout300ms_vs_1.5s_kernel", d)


def lock_idle_reps(c: Child, label: str, n: int) -> None:
    pid = c.host_pid
    locks, unlocks, both, fails = [], [], [], []
    for _ in range(n):
        t = time.perf_counter()
        rc, dl = DRV.lock(pid, 5000)
        if rc != 0:
            fails.append(DRV.err(rc))
            continue
        urc, du = DRV.unlock(pid)
        both.append(time.perf_counter() - t)
        if urc != 0:
            fails.append("unlock " + DRV.err(urc))
        locks.append(dl)
        unlocks.append(du)
    record(f"lock.{label}.idle_lock_unlock", {"lock": stats_us(locks), "unlock": stats_us(unlocks),
                                               "lock_plus_unlock": stats_us(both), "failures": fails[:5],
                                               "n_failures": len(fails)})


def parent_kernel_time(cycles: int, reps: int = 3) -> list:
    import torch

    out = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t = time.perf_counter()
        s.record()
        torch.cuda._sleep(cycles)
        e.record()
        e.synchronize()
        out.append({"event_ms": round(s.elapsed_time(e), 3), "wall_ms": round((time.perf_counter() - t) * 1e3, 3)})
    return out


def lock_vs_busy_child(c: Child, label: str) -> None:
    """Child keeps the GPU busy from a thread (20 ms kernels back to back). Parent times its own 20 ms kernel:
    idle GPU, child running (time-sliced?), child locked (quiesced?)."""
    import torch

    if not torch.cuda.is_available():
        record(f"lock.{label}.busy_child", "parent has no CUDA")
        return
    pid = c.host_pid
    cyc = int(calibrate(c) * 0.02)
    d = {"parent_20ms_kernel_idle_gpu": parent_kernel_time(cyc)}
    c.call({"op": "launch_thread", "cycles": cyc}, 10)
    time.sleep(0.2)
    d["parent_20ms_kernel_child_busy"] = parent_kernel_time(cyc)
    rc, dt = lock_rc(pid, 5000, 15)
    d["lock_rc"], d["lock_s"] = rc, round(dt, 4)
    if rc == "CUDA_SUCCESS":
        d["parent_20ms_kernel_child_locked"] = parent_kernel_time(cyc)
        d["unlock_rc"] = DRV.err(DRV.unlock(pid)[0])
    d["stop"] = c.call({"op": "stop_threads"}, 30)
    d["check_after"] = c.call({"op": "check"}, 30)
    record(f"lock.{label}.busy_child", d)


def lock_spin_thread(c: Child, label: str, n: int = 50) -> None:
    c.call({"op": "spin_thread"}, 10)
    lock_idle_reps(c, label + ".python_spin_thread", n)
    t = time.perf_counter()
    r = c.call({"op": "noop"}, 10)
    record(f"lock.{label}.python_spin_thread.noop_rtt_us", round((time.perf_counter() - t) * 1e6, 1))
    c.call({"op": "stop_threads"}, 30)


def part_lock_main():
    if DRV is None or not DRV.has.get("cuCheckpointProcessLock"):
        record("lock.available", False)
        return
    c = spawn("lockmain")
    record("lock.main.child", brief_info(c))
    if not c.info.get("cuda_ok"):
        record("lock.main.skipped", "child has no CUDA")
        stop_child(c)
        return
    pid = c.host_pid
    record("lock.main.state_before", {"state": DRV.state(pid), "restore_tid": DRV.restore_tid(pid)})
    for label, fn in (("long_kernel", lambda: lock_long_kernel(c, "main", 1.0)),
                      ("long_kernel_2", lambda: lock_long_kernel(c, "main_2", 1.0)),
                      ("timeout_vs_kernel", lambda: lock_timeout_vs_kernel(c, "main")),
                      ("idle_reps", lambda: lock_idle_reps(c, "main", 200)),
                      ("busy_child", lambda: lock_vs_busy_child(c, "main")),
                      ("spin_thread", lambda: lock_spin_thread(c, "main"))):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            record(f"lock.main.{label}.error", repr(e)[:1500])
            traceback.print_exc()
    # unlock twice / lock twice: the states the API refuses
    d = {}
    rc1, _ = DRV.lock(pid, 5000)
    rc2, _ = DRV.lock(pid, 500)
    d["lock_then_lock"] = [DRV.err(rc1), DRV.err(rc2)]
    d["unlock"] = DRV.err(DRV.unlock(pid)[0])
    d["unlock_again"] = DRV.err(DRV.unlock(pid)[0])
    record("lock.main.double_calls", d)
    stop_child(c)
    # lock on a process with no CUDA context
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    CHILDREN.append(p)
    time.sleep(0.3)
    rc, dt = lock_rc(p.pid, 1000, 10)
    record("lock.non_cuda_process", {"lock_rc": rc, "s": round(dt, 4), "state": DRV.state(p.pid)})
    kill_child(p)


def part_lock_sandboxed():
    if DRV is None or not DRV.has.get("cuCheckpointProcessLock"):
        return
    for label, uid, bw in (("uid65534_plain", 65534, None), ("root_bwrap_devbind", None, "devbind"),
                           ("uid65534_bwrap_nvonly", 65534, "nvonly"), ("uid65534_bwrap_devbind", 65534, "devbind")):
        if DEADLINE - time.monotonic() < 40:
            record(f"lock.{label}.skipped", "deadline")
            continue
        try:
            c = spawn("lock_" + label, uid=uid, bwrap=bw)
        except Exception as e:  # noqa: BLE001
            record(f"lock.{label}.spawn", repr(e)[:2500])
            continue
        try:
            record(f"lock.{label}.child", brief_info(c))
            if not c.info.get("cuda_ok") or c.host_pid is None:
                record(f"lock.{label}.skipped", "child has no CUDA or no host pid")
                continue
            lock_long_kernel(c, label, 1.0)
            lock_idle_reps(c, label, 50)
            if label == "uid65534_bwrap_nvonly":
                pipe_rtts(c, label, fenced=True, n=1000)
                ipc_test(c, label)
        except Exception as e:  # noqa: BLE001
            record(f"lock.{label}.error", repr(e)[:2500])
        finally:
            stop_child(c)


def step(d: dict, key: str, fn) -> None:
    try:
        d[key] = fn()
    except Exception as e:  # noqa: BLE001
        d[key] = f"ERR {e!r}"[:1500]


def part_lock_adversarial():
    if DRV is None or not DRV.has.get("cuCheckpointProcessLock"):
        return
    # a child that blocks every blockable signal in all its threads (mask set before CUDA starts)
    c = spawn("sigblock")
    pid = c.host_pid
    d = {}

    def idle_lock():
        rc, dt = lock_rc(pid, 2000, 8)
        out = {"rc": rc, "s": round(dt, 4)}
        if rc == "CUDA_SUCCESS":
            out["unlock"] = DRV.err(DRV.unlock(pid)[0])
        return out

    step(d, "idle_lock", idle_lock)
    step(d, "long_kernel", lambda: lock_long_kernel(c, "adversarial.sigblock", 0.5))

    def kill_locked():  # a locked child killed with SIGKILL: reaped? GPU usable afterwards?
        rc = DRV.err(DRV.lock(pid, 2000)[0])
        t = time.monotonic()
        os.killpg(c.p.pid, signal.SIGKILL)
        try:
            c.p.wait(15)
            return {"lock": rc, "reaped_after_s": round(time.monotonic() - t, 3), "rc": c.p.returncode}
        except subprocess.TimeoutExpired:
            return {"lock": rc, "reaped": False}

    step(d, "sigkill_while_locked", kill_locked)
    record("lock.adversarial.sigblock", d)
    try:
        import torch

        if torch.cuda.is_available():
            record("lock.adversarial.parent_cuda_after_kill", float(torch.arange(10, device="cuda").sum()))
    except Exception as e:  # noqa: BLE001
        record("lock.adversarial.parent_cuda_after_kill", repr(e))


def part_lock_stopped(release: str):
    """A SIGSTOPped child (it can stop itself): does Lock(timeoutMs=2000) return? Does it block the caller's other
    checkpoint calls (GetState / Lock of a healthy child)? Does SIGCONT or SIGKILL of the child release it?
    Run each release mode in its own process: a hung driver call cannot be cancelled."""
    if DRV is None or not DRV.has.get("cuCheckpointProcessLock"):
        return
    healthy = spawn("healthy")
    c = spawn("selfstopper")
    pid = c.host_pid
    d: dict = {"release": release}
    d["selfstop_ack"] = c.call({"op": "selfstop"}, 10)
    time.sleep(0.2)
    with open(f"/proc/{pid}/stat") as f:
        d["child_proc_state"] = f.read().split(")")[1].split()[0]
    box: dict = {}

    def locker():
        t = time.monotonic()
        rc, dt = DRV.lock(pid, 2000)
        box["rc"], box["returned_at"] = DRV.err(rc), time.monotonic()

    t0 = time.monotonic()
    th = threading.Thread(target=locker, daemon=True)
    th.start()
    th.join(5.0)
    d["lock_returned_within_5s"] = not th.is_alive()
    # while it is stuck (or not): other checkpoint calls of this process, on a healthy child
    d["healthy_state_during"] = timed_call(DRV.state, healthy.host_pid, limit=3)
    d["healthy_lock_during"] = timed_call(DRV.lock, healthy.host_pid, 1000, limit=3)
    if isinstance(d["healthy_lock_during"][0], int) and d["healthy_lock_during"][0] == 0:
        DRV.unlock(healthy.host_pid)
    # and a fresh process's view (another supervisor process): GetState of the healthy child
    try:
        r = subprocess.run([sys.executable, "-c", "import ctypes,sys; l=ctypes.CDLL('libcuda.so.1'); l.cuInit(0); s=ctypes.c_int(-1); "
                            "rc=l.cuCheckpointProcessGetState(int(sys.argv[1]), ctypes.byref(s)); print(rc, s.value)", str(healthy.host_pid)],
                           capture_output=True, text=True, timeout=10)
        d["healthy_state_from_other_process"] = (r.stdout + r.stderr).strip()[-300:]
    except subprocess.TimeoutExpired:
        d["healthy_state_from_other_process"] = "HUNG (10 s)"
    t_rel = time.monotonic()
    if release == "cont":
        os.kill(pid, signal.SIGCONT)
    else:
        os.kill(pid, signal.SIGKILL)
    th.join(15.0)
    d["lock_returned_after_release"] = not th.is_alive()
    if "rc" in box:
        d["lock_rc"] = box["rc"]
        d["lock_returned_s_after_call"] = round(box["returned_at"] - t0, 3)
        d["lock_returned_s_after_release"] = round(box["returned_at"] - t_rel, 3)
    if release == "cont":
        d["state_after"] = timed_call(DRV.state, pid, limit=3)
        if d.get("lock_rc") == "CUDA_SUCCESS":
            d["unlock"] = DRV.err(DRV.unlock(pid)[0])
        try:
            d["child_resumed_frame"] = recv(c.rfd, 5)
            d["check_after"] = c.call({"op": "check"}, 10)
        except Exception as e:  # noqa: BLE001
            d["check_after"] = repr(e)
    else:
        try:
            c.p.wait(10)
            d["child_reaped_rc"] = c.p.returncode
        except subprocess.TimeoutExpired:
            d["child_reaped_rc"] = "not reaped in 10 s"
    d["healthy_lock_after"] = timed_call(DRV.lock, healthy.host_pid, 1000, limit=5)
    if isinstance(d["healthy_lock_after"][0], int) and d["healthy_lock_after"][0] == 0:
        d["healthy_unlock_after"] = DRV.err(DRV.unlock(healthy.host_pid)[0])
    record(f"lock.stopped_child.release_{release}", d)
    stop_child(healthy)


def part_lock_blocking():
    """Which CUDA calls of a locked child block until Unlock?"""
    if DRV is None or not DRV.has.get("cuCheckpointProcessLock"):
        return
    c = spawn("blocking")
    pid = c.host_pid
    cyc = int(calibrate(c) * 0.01)
    d = {}
    for label, msg in (("event_query", None), ("launch_sleep_kernel", {"op": "sleep", "cycles": cyc}),
                       ("device_synchronize", {"op": "sync"}), ("alloc_launch_copy_to_host", {"op": "check"})):
        if msg is None:
            c.call({"op": "sleep", "cycles": cyc}, 10)
            c.call({"op": "sync"}, 10)
            msg = {"op": "query"}
        rc, dt = DRV.lock(pid, 5000)
        send(c.wfd, msg)
        try:
            r = recv(c.rfd, 0.5)
            blocked = False
        except TimeoutError:
            r, blocked = None, True
        t_un = time.monotonic()
        urc, _ = DRV.unlock(pid)
        if r is None:
            r = recv(c.rfd, 10)
        t_rep = time.monotonic()
        d[label] = {"lock": DRV.err(rc), "blocked_while_locked": blocked, "unlock": DRV.err(urc),
                    "reply_s_after_unlock": round(t_rep - t_un, 5) if blocked else None}
    c.call({"op": "sync"}, 10)
    record("lock.which_calls_block", d)
    stop_child(c)


def part_timeslice():
    """Parent times 10 bf16 8192^3 matmuls: GPU idle, child running matmuls, child locked (quiesced?)."""
    import torch

    if not torch.cuda.is_available() or DRV is None:
        return
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def mm_ms(reps=3):
        out = []
        for _ in range(reps):
            s_, e_ = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s_.record()
            for _ in range(10):
                a @ b
            e_.record()
            e_.synchronize()
            out.append(round(s_.elapsed_time(e_), 2))
        return out

    mm_ms(2)
    d = {"idle_gpu_ms_10mm": mm_ms()}
    c = spawn("mmchild")
    pid = c.host_pid
    c.call({"op": "mm_thread", "n": 8192}, 30)
    time.sleep(0.5)
    d["child_busy_ms_10mm"] = mm_ms()
    rc, dt = DRV.lock(pid, 10000)
    d["lock"], d["lock_s"] = DRV.err(rc), round(dt, 4)
    d["child_locked_ms_10mm"] = mm_ms()
    d["unlock"] = DRV.err(DRV.unlock(pid)[0])
    d["child_busy_again_ms_10mm"] = mm_ms()
    d["stop"] = c.call({"op": "stop_threads"}, 30)
    record("timeslice.matmul", d)
    stop_child(c)


# ---- pipe round trips (part b)


def part_pipe():
    c = spawn("pipe")
    try:
        record("pipe.child", brief_info(c))
        pipe_rtts(c, "plain_root", fenced=True)
    finally:
        stop_child(c)


def pipe_rtts(c: Child, label: str, fenced: bool = False, n: int = 2000) -> None:
    frame = {"op": "noop", "slot": 3, "args": [1, 2, 3], "pad": "x" * 64}
    for _ in range(200):
        c.call(frame, 10)
    xs = []
    for _ in range(n):
        t = time.perf_counter()
        c.call(frame, 10)
        xs.append(time.perf_counter() - t)
    record(f"pipe.{label}.noop_rtt", stats_us(xs))
    if c.info.get("cuda_ok"):
        xs = []
        for _ in range(n):
            t = time.perf_counter()
            c.call({"op": "sync"}, 10)
            xs.append(time.perf_counter() - t)
        record(f"pipe.{label}.sync_rtt", stats_us(xs))
        if fenced and DRV is not None and DRV.has.get("cuCheckpointProcessLock"):
            xs, bad = [], 0
            for _ in range(min(n, 500)):
                t = time.perf_counter()
                c.call(frame, 10)
                rc, _ = DRV.lock(c.host_pid, 5000)
                urc, _ = DRV.unlock(c.host_pid)
                bad += (rc != 0) + (urc != 0)
                xs.append(time.perf_counter() - t)
            record(f"pipe.{label}.noop_rtt_plus_lock_unlock", dict(stats_us(xs), failures=bad))


# ---- device-to-device copies (part c)


def part_copy():
    import torch

    if not torch.cuda.is_available():
        record("copy.skipped", "no CUDA")
        return
    res = {}
    for label, n in (("1MiB", 1 << 20), ("64MiB", 64 << 20), ("1GiB", 1 << 30), ("6GiB", 6 << 30)):
        src = torch.empty(n, dtype=torch.uint8, device="cuda")
        src.fill_(7)
        dst = torch.empty_like(src)
        reps = 200 if n <= (64 << 20) else 10
        for _ in range(3):
            dst.copy_(src)
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps):
            dst.copy_(src)
        e.record()
        e.synchronize()
        per = s.elapsed_time(e) / 1e3 / reps
        # one copy, synchronized, wall clock from the host (what a fence-bound path pays)
        walls = []
        for _ in range(5):
            torch.cuda.synchronize()
            t = time.perf_counter()
            dst.copy_(src)
            torch.cuda.synchronize()
            walls.append(time.perf_counter() - t)
        res[label] = {"bytes": n, "per_copy_us": round(per * 1e6, 2), "GBps_copied": round(n / per / 1e9, 1),
                      "GBps_read_plus_write": round(2 * n / per / 1e9, 1), "single_sync_wall_us_median": round(statistics.median(walls) * 1e6, 1),
                      "ok": bool(dst[-1].item() == 7)}
        record(f"copy.d2d.{label}", res[label])
        del src, dst
        torch.cuda.empty_cache()


# ---- CUDA IPC into a child (the output route)


def ipc_test(c: Child, label: str) -> None:
    import torch

    if not torch.cuda.is_available():
        return
    lib = DRV.lib

    class H(ctypes.Structure):
        _fields_ = [("reserved", ctypes.c_char * 64)]

    d = {}
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    ctx = ctypes.c_void_p(0)  # this part runs in its own thread: make the primary context current for the driver API
    d["ctx_rc"] = [DRV.err(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0)), DRV.err(lib.cuCtxSetCurrent(ctx))]
    for sz_label, n in (("64MiB", 64 << 20), ("1GiB", 1 << 30)):
        buf = torch.zeros(n, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        base, size = ctypes.c_uint64(0), ctypes.c_size_t(0)
        rc0 = lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(buf.data_ptr()))
        h = H()
        rc1 = lib.cuIpcGetMemHandle(ctypes.byref(h), ctypes.c_uint64(base.value))
        if rc0 or rc1:
            d[sz_label] = {"range_rc": DRV.err(rc0), "gethandle_rc": DRV.err(rc1)}
            continue
        r = c.call({"op": "ipc_write", "handle": list(bytes(h)),
                    "offset": buf.data_ptr() - base.value, "nbytes": n, "value": 5, "reps": 5}, 60)
        torch.cuda.synchronize()
        ok = bool((buf == 5).all().item()) if r.get("ok") else False
        e = dict(r)
        if "copy_s" in e:
            cs = e.pop("copy_s")
            e["copy_sync_s_median"] = round(statistics.median(cs), 6)
            e["GBps_copied"] = round(n / statistics.median(cs) / 1e9, 1)
        e["parent_sees_value"] = ok
        d[sz_label] = e
        del buf
        torch.cuda.empty_cache()
    record(f"ipc.{label}", d)


def part_ipc_plain():
    if DRV is None:
        return
    c = spawn("ipc_plain")
    try:
        if c.info.get("cuda_ok"):
            ipc_test(c, "plain_root")
    finally:
        stop_child(c)


# ---------------------------------------------------------------------------------------------------- main


def main() -> None:
    global OUT_PATH, DEADLINE
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="spike.json")
    ap.add_argument("--parts", default="", help="comma-separated subset of parts (default: all)")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds for the whole spike")
    args = ap.parse_args()
    OUT_PATH = args.out
    os.makedirs(os.path.dirname(os.path.abspath(OUT_PATH)), exist_ok=True)
    DEADLINE = T_START + args.budget
    if args.parts:
        wanted = set(args.parts.split(",")) | {"env", "driver", "access"}
        global run_part
        _run = run_part
        run_part = lambda name, fn, b: _run(name, fn, b) if name in wanted else None  # noqa: E731
    faulthandler.enable()
    faulthandler.dump_traceback_later(args.budget + 20, exit=False)
    record("started", time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    run_part("env", part_env, 30)
    run_part("driver", part_driver, 15)
    run_part("access", part_access, 10)
    run_part("parent_torch", part_torch_parent, 40)
    run_part("lock_main", part_lock_main, 70)
    run_part("pipe", part_pipe, 30)
    run_part("copy", part_copy, 25)
    run_part("lock_sandboxed", part_lock_sandboxed, 70)
    run_part("sandbox_bwrap", part_bwrap_variants, 50)
    run_part("sandbox_rlimit", part_rlimit, 40)
    run_part("sandbox_cgroup", part_cgroup, 40)
    run_part("ipc_plain", part_ipc_plain, 20)
    run_part("lock_blocking", part_lock_blocking, 30)
    run_part("timeslice", part_timeslice, 30)
    run_part("lock_adversarial", part_lock_adversarial, 45)
    # opt-in only (--parts): a SIGSTOPped child can hang cuCheckpointProcessLock beyond its timeout (seen on the
    # H200), so each release mode runs in its own process
    if args.parts:
        run_part("lock_stopped_cont", lambda: part_lock_stopped("cont"), 75)
        run_part("lock_stopped_kill", lambda: part_lock_stopped("kill"), 75)
    record("finished_s", round(time.monotonic() - T_START, 1))
    for p in CHILDREN:
        kill_child(p)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

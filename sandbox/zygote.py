"""The fork server: executors started from a process that has imported torch once, inside fresh bubblewrap sandboxes.

An executor's start-up is mostly importing torch (1.1-1.4 s of CPU on the 2-core CI machine, 2.5 s on a slow day;
issue 13: 3-4 s of ``worker_wait`` on the GPU host's path). A fork server pays it once. What it must not change is
the sandbox (ARCHITECTURE.md: a worker is never reused; the candidate's process holds no secret; issue 13: a forked
child reaches neither its siblings nor the template). So nothing of the sandbox is built here: bubblewrap still
builds each executor's namespaces and mounts exactly as for a spawned one (``process.bwrap_args``), around a
placeholder that only waits, and the forked executor joins that sandbox before anything else runs:

1. The supervisor starts ``bwrap <the sandbox> -- <placeholder>``; the placeholder says it is running (so every
   mount is in place) and then waits on a pipe whose only writer will be the executor (``SandboxSkeleton``).
2. It sends this server the sandbox's init pid and the executor's file descriptors (``ForkServer.fork``).
3. The server forks; the child enters the sandbox's cgroup, IPC, UTS, network, pid and mount namespaces
   (``setns``) and its root (``chroot`` to the init's root, as ``nsenter -r`` does), and forks again, so that the
   grandchild is a process of the sandbox's pid namespace; the child exits, and the grandchild is the init's.
4. The grandchild puts its descriptors in place and closes every other, takes the executor's environment, working
   directory and limits (``process.child_limits``, the same function a spawned executor's ``preexec_fn`` runs),
   drops to the sandbox's uid (``executor._drop_privileges``) and runs ``executor.main``.

The server is trusted: it runs no candidate code, holds no secret (no seed, no reference, nothing of an evaluation;
what it receives is descriptors, an environment and limits), and is never visible from inside a sandbox (another
pid namespace; it is outside every sandbox's mount namespace). It must not hold a CUDA context (a forked child could
not use one): it imports torch and never touches the device. It serves one supervisor, dies with it
(``PR_SET_PDEATHSIG``), and serves as root only (``process.root_mode``: the setns needs it; a non-root
supervisor spawns as before). Since stop 54 it serves cpu executors by default; cuda ones only with
``KBENV_FORK_SERVER=1`` until the GPU machine has run it (``enabled``).
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from kbenv.sandbox import process

NAMESPACES = ("cgroup", "ipc", "uts", "net", "pid", "mnt")  # mnt last: after it, /proc is the sandbox's
_FLAGS = {"cgroup": 0x02000000, "ipc": 0x08000000, "uts": 0x04000000, "net": 0x40000000, "pid": 0x20000000,
          "mnt": 0x00020000}
MAX_FRAME = 1 << 20
HIGH_FD = 200  # where the grandchild parks its descriptors before putting them in place
LIVE_FD = 7  # the executor's end of the pipe its sandbox's placeholder waits on (close-on-exec)
SETUP_TIMEOUT_S = 30.0  # the most a forked executor's own set-up (descriptors, limits, uid) may take


def enabled(device: str) -> bool:
    """Whether executors for ``device`` are forked: ``KBENV_FORK_SERVER`` ``1`` or ``0`` decides; by default the
    cpu ones (CI, laptops), not yet cuda's (not yet run on the GPU machine)."""
    flag = os.environ.get("KBENV_FORK_SERVER")
    if flag in ("0", "1"):
        return flag == "1"
    return not device.startswith("cuda")


# -- the server (its own process: python -m kbenv.sandbox.zygote SOCK_FD) --------------------------------------------

def _setns(fd: int, flag: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, flag) != 0:
        raise OSError(ctypes.get_errno(), f"setns: {os.strerror(ctypes.get_errno())}")


def _enter(ns_pid: int) -> None:
    """The child: into the namespaces of the sandbox whose init is ``ns_pid``, and its root."""
    root = os.open(f"/proc/{ns_pid}/root", os.O_RDONLY | os.O_DIRECTORY)
    todo = []
    for name in NAMESPACES:  # every link read before any setns: after the mount namespace's, /proc is another
        if os.readlink(f"/proc/{ns_pid}/ns/{name}") != os.readlink(f"/proc/self/ns/{name}"):
            todo.append((os.open(f"/proc/{ns_pid}/ns/{name}", os.O_RDONLY), _FLAGS[name]))
    if not any(flag == _FLAGS["pid"] for _, flag in todo) or not any(flag == _FLAGS["mnt"] for _, flag in todo):
        raise RuntimeError(f"process {ns_pid} is not in a sandbox of its own")
    for fd, flag in todo:
        _setns(fd, flag)
        os.close(fd)
    os.fchdir(root)
    os.chroot(".")
    os.close(root)


def _place(fds: list[int], err_w: int, log_fd: int, live_fd: int) -> int:
    """The grandchild: ``fds`` at 3, 4, ..., /dev/null on 0, the log on 1 and 2, the live pipe's end on
    :data:`LIVE_FD`; every other descriptor closed but the error pipe's, which is returned (moved high)."""
    keep = [*fds, log_fd, live_fd, err_w]
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, HIGH_FD) for fd in keep]
    os.closerange(0, HIGH_FD)
    top = max(high)
    for fd in range(HIGH_FD, top):
        if fd not in high:
            try:
                os.close(fd)
            except OSError:
                pass
    os.closerange(top + 1, 1 << 16)
    null = os.open("/dev/null", os.O_RDONLY)
    if null != 0:
        os.dup2(null, 0)
        os.close(null)
    *moved, log_h, live_h, err_h = high
    os.dup2(log_h, 1)
    os.dup2(log_h, 2)
    for i, fd in enumerate(moved):
        os.dup2(fd, 3 + i)
    os.dup2(live_h, LIVE_FD)
    os.set_inheritable(LIVE_FD, False)
    for fd in [*moved, log_h, live_h]:
        os.close(fd)
    return err_h


def _grandchild(req: dict, fds: list[int], err_w: int) -> None:
    from kbenv.sandbox import executor
    n = int(req["n_fds"])
    err_w = _place(fds[:n], err_w, fds[n], fds[n + 1])
    coerced = os.environ.get("LC_CTYPE")  # the interpreter's locale coercion at its start (PEP 538), as a spawned one's
    os.environ.clear()
    os.environ.update(req["env"])
    os.environ["PWD"] = req["cwd"]  # as bubblewrap's --chdir sets it
    if coerced and not any(k in req["env"] for k in ("LC_ALL", "LC_CTYPE", "LANG")):
        os.environ["LC_CTYPE"] = coerced
    os.chdir(req["cwd"])
    process.child_limits(**req["limits"])
    sys.argv = ["kbenv.sandbox.executor", *[str(3 + i) for i in range(n)]]
    sys.modules["__main__"] = executor  # as under ``python -m kbenv.sandbox.executor``: the process looks the same,
    sys.path[0] = req["cwd"]  # its first import path its working directory (the server's was "/")
    executor._drop_privileges()
    executor._limit_tasks()
    os.close(err_w)
    os._exit(executor.main(sys.argv[1:]))


def _fork(req: dict, fds: list[int]) -> dict:
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(err_r)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _enter(int(req["ns_pid"]))  # never anywhere but into a sandbox: a request without one is refused
            if os.fork() == 0:
                try:
                    _grandchild(req, fds, err_w)
                except BaseException as e:  # noqa: BLE001 - reported to the supervisor, loudly
                    os.write(err_w, f"{type(e).__name__}: {e}".encode()[:4000])
                os._exit(1)
            os._exit(0)
        except BaseException as e:  # noqa: BLE001
            os.write(err_w, f"{type(e).__name__}: {e}".encode()[:4000])
            os._exit(1)
    os.close(err_w)
    err, end = b"", time.monotonic() + SETUP_TIMEOUT_S
    while True:  # until the grandchild closes its end (its setup done) or exits
        if not select.select([err_r], [], [], max(0.0, end - time.monotonic()))[0]:
            err += b"the executor's set-up did not end in time"
            break
        chunk = os.read(err_r, 4096)
        if not chunk:
            break
        err += chunk
    os.close(err_r)
    if err:  # (the child and the grandchild write what failed before they exit; SIGCHLD reaps them)
        return {"ok": False, "error": err.decode(errors="replace")}
    return {"ok": True}


def _reap(*_) -> None:
    """Reap every exited child: the intermediate children, and the executors, whose subreaper this server is. At
    once, on SIGCHLD: a dead executor that is nobody's to reap keeps its sandbox's pid namespace, and with it the
    sandbox's outer bubblewrap, from ending (polled every second, killing a forked executor took 1.03 s against
    0.05 s for a spawned one)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve(sock: socket.socket) -> int:
    signal.signal(signal.SIGCHLD, _reap)
    sock.settimeout(5.0)  # and now and then regardless
    while True:
        _reap()
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_FRAME, 16)
        except TimeoutError:
            continue
        except OSError:
            return 0
        if not data:
            return 0
        try:
            reply = _fork(json.loads(data), fds)
        except Exception as e:  # noqa: BLE001 - a request it cannot serve: the supervisor's SpawnError
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps(reply).encode())


def main(argv: list[str]) -> int:
    libc = ctypes.CDLL(None)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: it dies with its supervisor
    # PR_SET_CHILD_SUBREAPER: an executor, orphaned when its intermediate child exits, becomes this server's (reaped
    # by it) rather than the host's init's, which in a container may reap nothing
    libc.prctl(36, 1, 0, 0, 0)
    sock = socket.socket(fileno=int(argv[0]))
    import importlib
    # what every executor imports, once (torch never touches the device here: no CUDA context), and what an
    # executor's set-up and the grandchild's own set-up import
    for name in ("torch", "kbenv.problems", "kbenv.sandbox.executor"):
        importlib.import_module(name)
    sock.send(json.dumps({"ready": True, "threads": len(os.listdir("/proc/self/task"))}).encode())
    return serve(sock)


# -- the client (in the supervisor) ------------------------------------------------------------------------------------

class ForkServerError(RuntimeError):
    """The fork server could not start an executor: a fault of the harness or the machine (``process.SpawnError``)."""


class ForkServer:
    """The supervisor's handle on its fork server for one device kind: started on first use, one request at a time."""

    def __init__(self, env: dict):
        self._lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([sys.executable, "-m", "kbenv.sandbox.zygote", str(theirs.fileno())],
                                     stdin=subprocess.DEVNULL, env=env, cwd="/", pass_fds=[theirs.fileno()])
        theirs.close()
        self.sock = ours
        self.sock.settimeout(120)
        hello = json.loads(self.sock.recv(MAX_FRAME) or b"{}")
        if not hello.get("ready"):
            raise ForkServerError("the fork server did not start")
        self.threads = hello.get("threads")

    def fork(self, ns_pid: int, fds: list[int], log_fd: int, live_fd: int, env: dict, cwd: str,
             limits: dict) -> None:
        """An executor in the sandbox whose init is ``ns_pid``, its descriptors ``fds`` at 3, 4, ..."""
        req = json.dumps({"ns_pid": ns_pid, "n_fds": len(fds), "env": env, "cwd": cwd,
                          "limits": limits}).encode()
        with self._lock:
            if self.proc.poll() is not None:
                raise ForkServerError(f"the fork server exited ({self.proc.returncode})")
            try:
                socket.send_fds(self.sock, [req], [*fds, log_fd, live_fd])
                reply = json.loads(self.sock.recv(MAX_FRAME) or b"{}")
            except (OSError, ValueError) as e:
                raise ForkServerError(f"the fork server did not answer: {e!r}") from e
        if not reply.get("ok"):
            raise ForkServerError(f"the fork server could not start an executor: {reply.get('error')}")

    def close(self) -> None:
        try:
            self.sock.close()
        finally:
            try:
                self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001
                self.proc.kill()


# -- the sandbox around a forked executor (in the supervisor) ---------------------------------------------------

# the sandbox's placeholder (zygote): it says it runs (every mount in place), then waits until the executor, the one
# writer of its stdin, is gone; bubblewrap's init, and with it the sandbox, ends with it
_PLACEHOLDER = "import os, sys; w = int(sys.argv[1]); os.write(w, b'1'); os.close(w); os.read(0, 1)"
_FORK_SERVERS: dict = {}
_FORK_LOCK = threading.Lock()
SKELETON_TIMEOUT_S = 30.0


def _fork_server(device_env: dict, cuda: bool) -> ForkServer:
    """This supervisor's fork server for the device kind (started on first use; again if it died)."""
    key = "cuda" if cuda else "cpu"
    with _FORK_LOCK:
        fs = _FORK_SERVERS.get(key)
        if fs is None or fs.proc.poll() is not None:
            env = {k: v for k, v in device_env.items() if not k.startswith("KBENV_RUN") and k != "KBENV_TMP_BOUND"}
            fs = _FORK_SERVERS[key] = ForkServer(env)
        return fs


def spawn_forked(workdir: Path, cuda: bool, env: dict, fds: list[int], limits: dict) -> subprocess.Popen:
    """An executor forked by the fork server into a bubblewrap sandbox built for it (``process.spawn``'s way as root).
    Returns the sandbox's outer bubblewrap, which lives as long as the executor: what the supervisor tracks, kills
    and reaps, as for a spawned executor."""
    live_r, live_w = os.pipe()
    log_r, log_w = os.pipe()
    ready_r, ready_w = os.pipe()
    info_r, info_w = os.pipe()
    cmd = process.bwrap_args(workdir, cuda, True) + ["--info-fd", str(info_w), sys.executable, "-I", "-S", "-c",
                                             _PLACEHOLDER, str(ready_w)]
    try:
        proc = subprocess.Popen(cmd, stdin=live_r, stdout=log_w, stderr=subprocess.STDOUT, env=env, cwd=workdir,
                                pass_fds=[info_w, ready_w], preexec_fn=lambda: process.child_limits(**limits))
    finally:
        for fd in (live_r, info_w, ready_w):
            os.close(fd)
    proc.stdout = os.fdopen(log_r, "rb")
    try:
        info = _read_all(info_r, b"}", SKELETON_TIMEOUT_S)
        ns_pid = json.loads(info)["child-pid"]
        if _read_all(ready_r, b"1", SKELETON_TIMEOUT_S) != b"1":
            raise process.SpawnError(f"the sandbox's placeholder did not start; bubblewrap said: {info!r}")
        _fork_server(env, cuda).fork(ns_pid, fds, log_w, live_w, env, process.HOME_DIR, limits)
    except (process.SpawnError, ForkServerError, ValueError, KeyError) as e:
        proc.kill()
        proc.wait()
        raise process.SpawnError(f"could not fork an executor into its sandbox: {e}") from e
    finally:
        for fd in (live_w, log_w, ready_r, info_r):
            os.close(fd)
    return proc


def _read_all(fd: int, until: bytes, timeout_s: float) -> bytes:
    """What ``fd`` yields until it ends with ``until`` or closes, within ``timeout_s``."""
    out, end = b"", time.monotonic() + timeout_s
    while not out.rstrip().endswith(until):
        left = end - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise process.SpawnError(f"the sandbox did not start within {timeout_s:.0f} s")
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        out += chunk
    return out


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))

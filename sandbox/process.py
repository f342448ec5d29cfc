"""Executor processes: spawn (sandbox, limits, an unprivileged host uid), pause, kill and reap.

A process is started per evaluation (or taken from the spares, which are never used twice) and killed with
every process of its PID namespace afterwards. As root with bubblewrap, a cpu executor is forked by the fork server
(:mod:`kbenv.sandbox.zygote`) into a sandbox bubblewrap built for it, instead of being a fresh interpreter.

Under bubblewrap it sees a read-only root with the host's private places (``/root``, ``/home``, ``/tmp``,
``/run``, ``/var/tmp``) replaced by empty directories, only the code paths it needs bound back read-only, its own
private directory bound read-only too, its home, caches and builds on its own /tmp (a tmpfs bounded at
:data:`WRITE_QUOTA_BYTES`, the one writable place), a private read-only ``/dev`` with only the GPU's device nodes
(cuda), no network and its own PID/IPC/UTS namespaces.

Its host uid: when the supervisor runs as root, bubblewrap mounts as root without a user namespace and the
executor becomes an unprivileged host uid of its own (:data:`SANDBOX_UIDS`, with :data:`TASK_LIMIT` tasks) before
anything else runs (``executor._drop_privileges``), so files only root may read stay unreadable. A non-root
supervisor's executor runs in a user namespace as the supervisor's own uid, which sees only what the binds expose.
"""

from __future__ import annotations

import glob
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kbenv.sandbox import cpus as cpus_mod, wire

NOBODY = 65534
# As root, each sandboxed process (an executor, a builder) runs as a host uid of its own, drawn from this range
# (no account has one), with at most TASK_LIMIT processes and threads of that uid: a fork or thread bomb stops at
# its own limit, and one sandbox's count cannot starve another's (with one uid for all, a bomb in one would make
# every spare's start fail: a harness fault caused by a candidate; known-bad 19:thread_bomb).
SANDBOX_UIDS = range(2_000_000_000, 2_100_000_000)
TASK_LIMIT = 1024
SEND_TIMEOUT_S = 10.0  # the most a frame to an executor may wait for room in its pipe (ExecutorProcess.send)
HIDDEN = ("/tmp", "/root", "/home", "/run", "/var/tmp", "/mnt", "/media", "/srv")
# Where a sandboxed process builds C++/CUDA extensions (its TORCH_EXTENSIONS_DIR): one fixed path inside every
# sandbox, on the sandbox's own /tmp, so that a build made ahead by a builder (kbenv.sandbox.builds: packed there
# into a tar, unpacked here by the executor) is up to date, path for path, in the executor that installs it.
EXT_DIR = "/tmp/kbenv-ext"
# A sandboxed process's home, caches and working directory, on the same /tmp. Its private directory on the host
# is bound read-only (the supervisor puts a build made ahead there): nothing it writes reaches the host's disk.
HOME_DIR = "/tmp/kbenv-home"
# What a sandboxed process (an executor or a builder: both run candidate code) may write: its sandbox's /tmp is
# the one writable place, a tmpfs (host memory) bounded at this size and file count, so that a candidate cannot
# fill the host's memory or disk and take the supervisor down with it (known-bad 19:fill_tmp). An honest
# candidate writes its Triton cache and its extension builds there: a few MiB, tens of files.
WRITE_QUOTA_BYTES = 1 << 30
WRITE_QUOTA_FILES = 16384


class SpawnError(RuntimeError):
    """An executor could not be started: a fault of the harness or the machine, never of a candidate."""


def have_bwrap() -> bool:
    return shutil.which("bwrap") is not None


_ROOT_MODE: bool | None = None


def root_mode() -> bool:
    """Whether bubblewrap can mount as real root here (the supervisor is root with CAP_SYS_ADMIN), so that the
    executor can drop to a real unprivileged uid. Probed once."""
    global _ROOT_MODE
    if _ROOT_MODE is None:
        _ROOT_MODE = False
        if os.getuid() == 0 and have_bwrap():
            try:
                r = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                                    "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "true"],
                                   capture_output=True, timeout=30)
                _ROOT_MODE = r.returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                _ROOT_MODE = False
    return _ROOT_MODE


def _code_binds() -> list[str]:
    """Read-only binds for the interpreter, its packages, kbenv's source and the CUDA libraries where they live
    under a hidden directory (a clone or venv under /tmp or /root), which the sandbox replaces with an empty one.

    Only code: the interpreter's prefixes, package directories on ``sys.path`` (``site-packages``,
    ``dist-packages``), kbenv's own tree, PYTHONPATH, LD_LIBRARY_PATH and CUDA_HOME. Never a hidden directory
    itself, and never an arbitrary ``sys.path`` entry: a Ray worker puts the driver's working directory there,
    and with ``kbenv`` started from /tmp that bound the host's whole /tmp (read-only) into every sandbox."""
    import kbenv
    paths = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
             str(Path(kbenv.__file__).resolve().parents[1])}
    paths |= {p for p in sys.path if p and os.path.basename(p.rstrip("/")) in ("site-packages", "dist-packages")}
    for var in ("PYTHONPATH", "LD_LIBRARY_PATH"):
        paths |= {p for p in os.environ.get(var, "").split(os.pathsep) if p}
    if os.environ.get("CUDA_HOME"):
        paths.add(os.environ["CUDA_HOME"])
    real = {os.path.realpath(p) for p in paths if os.path.isdir(p)}
    keep = sorted({p for p in real if any(p.startswith(h + "/") for h in HIDDEN)})
    top = [p for p in keep if not any(p != q and p.startswith(q + "/") for q in keep)]
    return [arg for p in top for arg in (*_parents(p), "--ro-bind", p, p)]


def sandbox_uid() -> int:
    """A fresh host uid for one sandboxed process (:data:`SANDBOX_UIDS`): random, so that supervisors of one host
    draw without coordinating (two live sandboxes share one with odds of about 1e-8 per pair)."""
    return SANDBOX_UIDS[int.from_bytes(os.urandom(4), "little") % len(SANDBOX_UIDS)]


def userns_task_limit() -> bool:
    """Whether a task limit set inside a user namespace counts that namespace's tasks only (Linux 5.14 and later:
    per-namespace ucounts; checked by hand on 6.18: a sandbox limited to 50 forked 10 while its host uid had 61
    tasks). On older kernels it counts every task of the supervisor's own uid, so none is set there."""
    import platform
    try:
        major, minor = (int(x) for x in platform.release().split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 14)


def identity_env(uid: int | None) -> dict:
    """What a sandboxed process (an executor, a builder) is told before it runs anything: as root (``uid``), the
    uid of its own to become and the bound to remount its /tmp with (``executor._drop_privileges``); in a user
    namespace (None), the task limit to set once inside where the kernel counts that namespace alone."""
    if uid is not None:
        return {"KBENV_RUN_AS": str(uid), "KBENV_TMP_BOUND": write_bound()}
    return {"KBENV_TASK_LIMIT": str(TASK_LIMIT)} if userns_task_limit() else {}


def sandbox_limits(as_root: bool, untrusted: bool = True) -> None:
    """Limits a spawned process starts with (in ``preexec_fn``). One that will run candidate code is the host's
    first choice when memory runs out (``oom_score_adj`` 1000, inherited by all it starts, and no unprivileged
    process can lower it): the kernel's OOM killer then ends a candidate, never the supervisor or Ray beside it. Its
    tasks are limited where it runs as a uid of its own (as root; in a user namespace the process sets its own limit
    once inside, ``KBENV_TASK_LIMIT``: set here, on the supervisor's uid, it would count the supervisor's processes)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if untrusted:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    if as_root:
        resource.setrlimit(resource.RLIMIT_NPROC, (TASK_LIMIT, TASK_LIMIT))


def _parents(path: str, mode: str = "0755") -> list[str]:
    """Create a bind target's missing parents with ``mode`` (bubblewrap would make them 0700 root)."""
    parts = Path(path).parts
    out = []
    for i in range(2, len(parts)):
        out += ["--perms", mode, "--dir", str(Path(*parts[:i]))]
    return out


def _dev_args(cuda: bool) -> list[str]:
    args = ["--dev", "/dev"]
    if cuda:
        for node in sorted(glob.glob("/dev/nvidia*")):
            args += ["--dev-bind", node, node]
        if os.path.isdir("/dev/dri"):
            args += ["--dev-bind", "/dev/dri", "/dev/dri"]
    return args


def bwrap_args(workdir: Path, cuda: bool, as_root: bool, out_file: str | None = None) -> list[str]:
    """The sandbox: host read-only, hidden directories empty (read-only but for /tmp), the private ``workdir``
    bound read-only, :data:`HOME_DIR` and :data:`EXT_DIR` writable on the sandbox's bounded /tmp
    (:func:`write_bound`), and ``out_file`` (a file in ``workdir``: a builder's one output) bound writable."""
    hidden, read_only = [], []
    for d in HIDDEN:
        if os.path.isdir(d):
            if d == "/tmp" and tmpfs_size_flag():
                hidden += ["--size", str(WRITE_QUOTA_BYTES)]
            hidden += ["--perms", "0755", "--tmpfs", d]
            if d != "/tmp":  # a user namespace's tmpfs belongs to the sandbox's uid: nothing may be written there
                read_only += ["--remount-ro", d]
    read_only += ["--remount-ro", "/dev"]  # likewise its /dev (and /dev/shm); device nodes still open read-write
    ns = (["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"] if as_root
          else ["--unshare-all", "--uid", str(NOBODY), "--gid", str(NOBODY), "--cap-drop", "ALL"])
    out = ["--bind", out_file, out_file] if out_file else []
    return ["bwrap", "--ro-bind", "/", "/", *_dev_args(cuda), "--proc", "/proc", *hidden, *_code_binds(),
            *_parents(str(workdir), "0711"), "--ro-bind", str(workdir), str(workdir), *out,
            "--perms", "01777", "--dir", HOME_DIR, "--perms", "01777", "--dir", EXT_DIR, *read_only, *ns,
            "--die-with-parent", "--new-session", "--chdir", HOME_DIR]


_SIZE_FLAG: bool | None = None


def tmpfs_size_flag() -> bool:
    """Whether this bubblewrap sizes a tmpfs itself (``--size``, bubblewrap 0.8 and later: Debian 12's has it,
    Ubuntu 22.04's 0.6 does not). Probed once."""
    global _SIZE_FLAG
    if _SIZE_FLAG is None:
        try:
            r = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=30)
            _SIZE_FLAG = "--size" in r.stdout + r.stderr
        except (OSError, subprocess.TimeoutExpired):
            _SIZE_FLAG = False
    return _SIZE_FLAG


def write_bound() -> str | None:
    """How a sandboxed process's writes are bounded (the sandbox's /tmp, :data:`WRITE_QUOTA_BYTES`): as root the
    process remounts its own /tmp with the bound before it drops to its own uid (``executor._drop_privileges``,
    told by ``KBENV_TMP_BOUND``); in a user namespace bubblewrap sizes it (``--size``, 0.8 and later). None where
    neither can: a non-root supervisor with an older bubblewrap (its sandbox's /tmp is then bounded only by the
    kernel's default for a tmpfs, half the host's memory)."""
    if root_mode():
        return f"{WRITE_QUOTA_BYTES}:{WRITE_QUOTA_FILES}"
    return f"{WRITE_QUOTA_BYTES}:" if tmpfs_size_flag() else None


class StopIncomplete(Exception):
    """Processes of an executor still running at a stop's deadline; ``held``: those stopped so far."""

    def __init__(self, reason: str, held: list[int]):
        super().__init__(reason)
        self.held = held


class ExecutorProcess:
    """A spawned executor: its process, pipes, memfd (the cpu region), socket (cuda) and private directory."""

    def __init__(self, proc, fd_to, fd_from, memfd, workdir: Path, sock=None, trusted: bool = False):
        self.proc, self.fd_to, self.fd_from, self.memfd = proc, fd_to, fd_from, memfd
        self.workdir, self.sock, self.trusted = workdir, sock, trusted
        self.spawned_at = time.monotonic()
        self.started = self.ready = self.dead = False
        self.pid_ns: str | None = None
        self.killed_at: int | None = None  # boot ticks of the first kill (signal_kill)
        self.outer_grace_until = 0.0  # (monotonic) until then the outer bwrap is left to reap its namespace (signal_kill)
        self.ns_fd: int | None = None  # the sandbox's pid namespace, held open until reaped (hold_namespace)
        self.uid: int | None = None
        self.output = b""

    # -- channel --------------------------------------------------------------------------------------------
    def send(self, obj: dict) -> None:
        """A frame to the executor, which an honest executor reads at once (a block's frame fits its pipe, and it
        has read the last block's before it replied): a pipe still full after :data:`SEND_TIMEOUT_S` is the
        executor's doing, never a wait of the supervisor's without end."""
        try:
            wire.write_frame(self.fd_to, obj, time.monotonic() + SEND_TIMEOUT_S)
        except wire.ChannelTimeout:
            raise wire.ChannelClosed(f"the executor left its pipe full for {SEND_TIMEOUT_S:.0f} s") from None
        except OSError as e:
            raise wire.ChannelClosed(f"executor pipe closed: {e}") from e

    def recv(self, deadline: float) -> dict:
        """The executor's next frame: hostile data, refused above :data:`wire.MAX_REPLY` before it is unpacked."""
        return wire.read_frame(self.fd_from, deadline, wire.MAX_REPLY)

    # -- signals --------------------------------------------------------------------------------------------
    def pids(self) -> list[int]:
        """Every process of this executor now (its tree, and its sandbox's pid namespace); none once it exited."""
        return self._tree() if self.proc.poll() is None else []

    def _tree(self) -> list[int]:
        pids = set(process_tree(self.proc.pid))
        if self.pid_ns:
            pids |= set(pids_in_namespace(self.pid_ns))
        return sorted(pids)

    def pause(self, timeout_s: float = 10.0) -> list[int]:
        """SIGSTOP every process of this executor, and return them: scan, stop what the scan found, wait until
        it is stopped, and scan again until a scan finds only processes already stopped. A stopped process
        cannot fork, so once a scan made after the stops finds nothing new, nothing can appear while the
        executor is paused (the usual case: two scans). A fixed number of scans is not enough: a process that
        forks a child and exits, over and over, is never where the last scan saw it, and its child would run
        while the baselines are timed (red-team, stop 29). Every process found counts, a zombie too (it ran after
        the last scan, and may have forked after this one's listing). A process of another user (a setuid
        bubblewrap) cannot be signalled from here and cannot be the candidate's: it is left as it is. Raises
        :class:`StopIncomplete` (with the processes stopped so far) when processes still run at the deadline."""
        deadline = time.monotonic() + timeout_s
        held: set[int] = set()
        foreign: set[int] = set()
        while True:
            late = [q for q in self.pids() if q not in held and q not in foreign]
            if not late:
                return sorted(held)
            if time.monotonic() > deadline:
                raise StopIncomplete(f"the executor's processes kept escaping the stop (forking faster than they "
                                     f"could be stopped): {len(late)} not stopped", sorted(held))
            for q in late:
                try:
                    os.kill(q, signal.SIGSTOP)
                    held.add(q)
                except ProcessLookupError:
                    pass  # gone: a child it left is in the next scan
                except PermissionError:
                    foreign.add(q)
            while running := [q for q in held if proc_state(q) not in "TtXZ"]:
                if time.monotonic() > deadline:
                    raise StopIncomplete(f"processes {sorted(running)} did not stop", sorted(held))
                time.sleep(0.0002)

    @staticmethod
    def resume(pids: list[int]) -> None:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass

    def hold_namespace(self) -> None:
        """Keep the sandbox's pid namespace open (a file descriptor on it) until this executor is reaped: an open
        namespace keeps its id, so no sandbox started later can be given it, and a scan for this executor's
        processes never finds another's. (The scans' start-time bound remains, for a namespace that could not
        be opened.)"""
        for pid in process_tree(self.proc.pid):
            try:
                path = f"/proc/{pid}/ns/pid"
                if os.readlink(path) == self.pid_ns:
                    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                    if os.readlink(f"/proc/self/fd/{fd}") == self.pid_ns:
                        self.ns_fd = fd
                        return
                    os.close(fd)
            except OSError:
                continue

    # the namespace's last process may take a CUDA context's teardown to exit (1.5-1.8 s, H100, stop 44), and the
    # init exits only after it: killed before, the outer process would leave the init to the host's init again
    OUTER_GRACE_S = 5.0

    def signal_kill(self) -> None:
        """SIGKILL every process of its namespace now, and the process itself (the outer bwrap), without waiting.

        Every scan of the namespace, now and later, keeps only processes started before the first kill: once
        the namespace is gone its id can be given to a new sandbox (a spare, a baseline, a builder started
        meanwhile), whose processes are not this executor's.

        The outer bwrap runs no candidate code (it is outside the namespace) and is its init's parent: killed with
        the rest, it left that init a zombie for whoever adopts orphans to reap, and the namespace stayed listed
        for 1.0-1.6 s after every other process of it had gone (the CPU machine, stop 49), which every wait for a
        dying executor waited out. So the first kill of a sandbox whose namespace has processes spares the outer
        process for up to ``OUTER_GRACE_S``: it reaps the init as it dies and exits, and :meth:`kill` waits for
        that; a later call past the grace kills it too."""
        first = self.killed_at is None
        if first:
            self.killed_at = _boot_ticks()
        in_ns = pids_in_namespace(self.pid_ns, started_by=self.killed_at) if self.pid_ns else []
        if first and in_ns and self.proc.poll() is None:
            self.outer_grace_until = time.monotonic() + self.OUTER_GRACE_S
        for pid in in_ns:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.proc.poll() is not None or time.monotonic() < self.outer_grace_until:
            return
        for pid in sorted(set(process_tree(self.proc.pid)) - set(in_ns)):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()

    def kill(self) -> None:
        """SIGKILL, wait until every process of it is gone, close the channel (idempotent). A survivor is a
        fault of the machine, raised as :class:`SpawnError`."""
        if self.dead:
            return
        self.signal_kill()
        killed_at = self.killed_at
        try:  # the outer bwrap exits once it has reaped its namespace's init (signal_kill)
            self.proc.wait(timeout=max(0.0, self.outer_grace_until - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.signal_kill()  # past the grace: the outer process too
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired as e:
            raise SpawnError(f"executor {self.proc.pid} survived SIGKILL") from e
        if self.pid_ns:
            deadline = time.monotonic() + 10
            # only processes older than the kill: once this namespace is gone its id can be given to a new
            # sandbox (a spare started meanwhile), whose processes are not this executor's
            while left := pids_in_namespace(self.pid_ns, started_by=killed_at):
                if time.monotonic() > deadline:
                    raise SpawnError(f"sandbox processes {left} survived the evaluation")
                for pid in left:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                time.sleep(0.02)
        self.dead = True
        for fd in (self.fd_to, self.fd_from, self.memfd, self.ns_fd):
            if fd is None:
                continue
            try:
                os.close(fd)
            except OSError:
                pass
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    # -- output ----------------------------------------------------------------------------------------------
    def drain_output(self) -> None:
        """Keep the last 64 KiB of the process's stdout and stderr (in memory; they decide nothing)."""
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

    def log_tail(self, n: int = 3000) -> str:
        for _ in range(50):
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        time.sleep(0.02)
        return self.output.decode(errors="replace")[-n:]


def sandbox_env(workdir: Path, device: str, in_bwrap: bool) -> dict:
    """The whole environment of a spawned process (nothing of the supervisor's own beyond paths and the CUDA
    settings): home and caches in :data:`HOME_DIR` and extensions in :data:`EXT_DIR` inside a bubblewrap sandbox
    (its private directory, ``KBENV_INBOX``, is read-only there), in the private directory without one; the
    interpreter's directory first on PATH (a pip-installed ``ninja`` for torch's extension builds)."""
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "/usr/bin:/bin")])
    home = Path(HOME_DIR) if in_bwrap else workdir  # in bubblewrap the private directory is read-only
    env = {"PATH": path, "HOME": str(home), "TMPDIR": str(home), "KBENV_INBOX": str(workdir),
           "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
           "TRITON_CACHE_DIR": str(home / ".triton"),
           "TORCH_EXTENSIONS_DIR": EXT_DIR if in_bwrap else str(workdir / ".torch_ext"),
           "TORCHINDUCTOR_CACHE_DIR": str(home / ".inductor"),
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "KBENV_WORKER_DEVICE": device,
           "KBENV_SANDBOXED": "1"}  # kbenv's public API and env registry left out of it (kbenv/__init__.py)
    for k in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "VIRTUAL_ENV"):
        if k in os.environ:
            env[k] = os.environ[k]
    if not device.startswith("cuda"):
        env["TRITON_INTERPRET"] = "1"
    return env


def spawn(root: Path, device: str, sandbox: str, memory_limit: int | None, host_memory_cap: bool,
          trusted: bool = False, extra_env: dict | None = None, cpus: tuple | None = None) -> ExecutorProcess:
    """Start an executor (it imports torch, then waits: on cuda it touches the GPU only after ``start``), on the
    cores ``cpus`` when given (the supervisor's background cores: :mod:`kbenv.sandbox.cpus`)."""
    cuda = device.startswith("cuda")
    workdir = Path(tempfile.mkdtemp(prefix="w-", dir=root))
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    # sealable: a candidate's region is sealed at its size before any candidate code runs (lent.seal_size); on
    # cuda the region is device memory and this memfd stays empty, so it is sealed at size 0 now
    memfd = os.memfd_create("kbenv-lent", os.MFD_ALLOW_SEALING)
    if cuda and not trusted:
        from kbenv.sandbox.lent import seal_size
        seal_size(memfd)
    env = sandbox_env(workdir, device, sandbox == "bwrap" and not trusted)
    env.update(extra_env or {})
    cmd = [sys.executable, "-m", "kbenv.sandbox.executor", str(to_r), str(from_w), str(memfd)]
    pass_fds = [to_r, from_w, memfd]
    sock = child_sock = None
    if cuda:
        sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cmd.append(str(child_sock.fileno()))
        pass_fds.append(child_sock.fileno())
    sandboxed = sandbox == "bwrap" and not trusted
    as_root = sandboxed and root_mode()
    if sandboxed:
        uid = sandbox_uid() if as_root else None
        if as_root:
            os.chown(workdir, uid, uid)
        else:
            os.chmod(workdir, 0o777)
        env.update(identity_env(uid))
        cmd = bwrap_args(workdir, cuda, as_root) + cmd
    elif not trusted and os.getuid() == 0:
        os.chown(workdir, NOBODY, NOBODY)

    from kbenv.sandbox import zygote  # (it imports this module)
    limits = {"cpus": list(cpus) if cpus else None, "as_root": as_root, "trusted": trusted,
              "memory_limit": memory_limit, "cuda": cuda, "host_memory_cap": host_memory_cap}
    if sandboxed and as_root and zygote.enabled(device):
        proc = zygote.spawn_forked(workdir, cuda, env, pass_fds, limits)
    else:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=env, cwd=workdir, pass_fds=pass_fds, preexec_fn=lambda: child_limits(**limits))
    os.close(to_r)
    os.close(from_w)
    os.set_blocking(to_w, False)  # the supervisor's writes have a deadline (ExecutorProcess.send)
    if child_sock is not None:
        child_sock.close()
    p = ExecutorProcess(proc, to_w, from_r, memfd, workdir, sock, trusted)
    threading.Thread(target=p.drain_output, daemon=True).start()
    return p


def child_limits(cpus: list | None, as_root: bool, trusted: bool, memory_limit: int | None, cuda: bool,
                 host_memory_cap: bool) -> None:
    """What a spawned process starts with (its ``preexec_fn``; a forked executor runs it too, ``zygote``): a
    session of its own, its cores, :func:`sandbox_limits`, and bounds on its files and memory."""
    os.setsid()
    cpus_mod.pin_self(tuple(cpus) if cpus else None)
    sandbox_limits(as_root, untrusted=not trusted)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 30, 1 << 30))
    if memory_limit and not trusted:
        # cpu: the address space; cuda: the data segment (CUDA reserves a huge virtual range, which
        # RLIMIT_AS would refuse, while its host allocations count as data).
        which = resource.RLIMIT_DATA if cuda else resource.RLIMIT_AS
        if not cuda or host_memory_cap:
            resource.setrlimit(which, (memory_limit, memory_limit))


def start(p: ExecutorProcess) -> None:
    """Let a spawned cuda executor touch the GPU (its CUDA context); cpu executors need no start."""
    if p.started:
        return
    p.started = True
    if p.sock is not None:
        try:
            p.send({"type": "start"})
        except wire.ChannelClosed:
            pass  # gone: await_ready reports it


def await_ready(p: ExecutorProcess, timeout_s: float) -> None:
    """The executor's first frame, sent before any candidate code exists; without it the harness is broken."""
    if p.ready:
        return
    start(p)
    try:
        msg = p.recv(time.monotonic() + timeout_s)
    except (wire.ChannelClosed, wire.ChannelTimeout) as e:
        tail = p.log_tail()
        p.kill()
        raise SpawnError(f"the executor process did not start ({e!r}); log:\n{tail}") from e
    if msg.get("type") != "ready":
        p.kill()
        raise SpawnError("the executor's first frame was not 'ready'")
    p.ready = True
    p.uid = msg.get("uid") if isinstance(msg.get("uid"), int) else None
    ns = msg.get("pid_ns")
    if isinstance(ns, str) and ns != os.readlink("/proc/self/ns/pid"):
        p.pid_ns = ns
        p.hold_namespace()


def proc_state(pid: int) -> str:
    """A process's state letter from /proc (``R``, ``S``, ``T`` stopped, ``Z`` zombie...); ``X`` when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return stat[stat.rindex(")") + 2]
    except (OSError, ValueError, IndexError):
        return "X"


def process_tree(root: int) -> list[int]:
    """``root`` and its descendants, from /proc (the host's view, which sees into the sandbox's namespaces).

    Walked down from ``root`` through each thread's ``children`` list, which costs the executor's own processes
    only: the whole-/proc scan below read every process's ``stat`` (9.5 ms with 450 processes on the host, the
    load a GPU host with Ray's and torch.compile's workers carries, and the fence takes several per block).
    Where a ``children`` list cannot be read (a kernel without ``CONFIG_PROC_CHILDREN``), the whole scan."""
    try:
        return _tree_by_children(root)
    except OSError:
        return _tree_by_scan(root)


def _tree_by_children(root: int) -> list[int]:
    out, stack, seen = [], [root], {root}
    while stack:
        pid = stack.pop()
        out.append(pid)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            continue  # exited meanwhile: it has no children to walk (they were reparented into the tree's init)
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    kids = f.read().split()
            except FileNotFoundError:
                if not os.path.exists(f"/proc/{pid}"):
                    break  # the process exited
                if os.path.exists(f"/proc/{pid}/task/{tid}/stat"):
                    raise  # the thread is there and has no children file: the kernel lacks it
                continue  # that thread exited
            for k in kids:
                c = int(k)
                if c not in seen:
                    seen.add(c)
                    stack.append(c)
    return out


def _tree_by_scan(root: int) -> list[int]:
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


def _boot_ticks() -> int:
    """Now, in the clock ticks since boot that /proc/PID/stat's start time uses."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def _start_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def pids_in_namespace(ns: str | None, started_by: int | None = None) -> list[int]:
    """Processes in the pid namespace ``ns`` (its ``pid:[inode]`` name); with ``started_by`` (boot ticks), only
    those started before that tick: a namespace's id is reused once it is gone, by whichever sandbox starts next."""
    if not ns:
        return []
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") != ns:
                    continue
            except OSError:
                continue
            if started_by is not None:
                st = _start_ticks(int(entry))
                if st is None or st >= started_by:
                    continue
            out.append(int(entry))
    return out

"""Ahead-of-time builds of candidates' C++/CUDA extensions, off the GPU's path (trusted side).

A candidate that calls ``torch.utils.cpp_extension.load_inline`` (or ``load``) compiles when its module is
imported, in the executor's compile phase, while the GPU waits: 30-50 s with nvcc. :class:`BuildFarm` runs that
import ahead, in parallel, in sandboxed builder processes without a GPU (:mod:`kbenv.sandbox.builder`), as soon
as a source is known (:meth:`BuildFarm.submit`; the Ray pool submits a batch's sources when it starts it).

Phases of one build: the source written to a private directory; the builder run in the same bubblewrap sandbox as
an executor (no GPU device, ``CUDA_VISIBLE_DEVICES`` empty), as a uid of its own, under the compile phase's time
limit, compiling into its extension directory (:data:`process.EXT_DIR`) on the sandbox's bounded /tmp; then, if the
import finished, the builder packs that directory's regular files into one tar (:func:`pack_build`: no link is
followed, no other file type is kept, sizes are bounded), the one host file its sandbox lets it write, capped by its
file-size limit. When the evaluation of that exact source compiles, the tar is copied into its executor's private
directory and the executor unpacks it into its own extension directory before importing the candidate: torch
finds the build up to date (same paths, same flags: ``TORCH_CUDA_ARCH_LIST`` is set alike for builders and
executors) and only loads it.

Trust. A build is keyed by the sha256 of the source (and the device's architecture): only an evaluation of the
same source gets it, and it runs only in that candidate's own executor, never in a trusted process. The trusted
side never imports, runs or parses what a builder wrote: it moves and copies the builder's tar as opaque bytes, and
only the candidate's own executor unpacks it, in its sandbox. A failed, timed-out or oversized build is simply
absent: the executor compiles itself, as without the farm, and the candidate is judged on that.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import tempfile
import threading
from pathlib import Path

from kbenv.sandbox import process
from kbenv.sandbox.cpus import pin_self

MAX_BUILD_BYTES = 512 << 20  # a CUDA extension's objects and library are tens of MiB
MAX_BUILD_FILES = 4096
KEEP_BUILDS = 64  # finished builds kept (oldest dropped first)
MTIME_NS = "KBENV.mtime_ns"  # a packed file's exact mtime (a pax header): see unpack_build
CORES_PER_BUILD = 4  # a builder's share of the background cores (see default_workers)


def default_workers(background: tuple | None, sharers: int = 1) -> int:
    """Concurrent builds for a supervisor whose spawned processes run on ``background`` cores (None: unknown),
    which ``sharers`` supervisors share (the lanes of one GPU).

    A build runs two compiler jobs at once (``MAX_JOBS=2``: the host .cpp with torch's headers and the .cu with
    nvcc, each 15-30 s of one core), and shares the background cores with spares importing torch, baseline sets
    and the decoy's executor. Measured on an H100 host (stop 36, 12 background cores): 8 builders at once made the
    first candidate wait 99 s for its build, against 31 s for a build alone. Builds finish in the order they were
    submitted only when few run at once, and the GPU needs the first one first: a builder per
    :data:`CORES_PER_BUILD` background cores (3 on 12). That is not enough to keep up with back-to-back
    evaluations of 8-10 s: each candidate needs two builds of about 30 s (its own and its decoy's), so 3
    builders make one candidate in three wait about 27 s (H100, stop 38, 8 candidates of problem 19), against
    30-38 s of compilation for every candidate without builders. Between 3 and 8 builders is not measured yet."""
    return max(1, len(background) // (CORES_PER_BUILD * max(sharers, 1))) if background else 2


def needs_build(source: str) -> bool:
    """Whether importing ``source`` would compile an extension (the only imports worth running ahead)."""
    return "load_inline" in source or "cpp_extension" in source


class BuildFarm:
    """``workers`` concurrent builds for one supervisor's device (``arch``: its ``TORCH_CUDA_ARCH_LIST``, or
    None on the CPU)."""

    def __init__(self, root: Path, device: str, arch: str | None, time_limit_s: float, memory_limit: int | None,
                 workers: int | None = None, cpus: tuple | None = None, sharers: int = 1):
        self.cpus = cpus  # the supervisor's background cores (kbenv.sandbox.cpus): never a timed side's
        self.root = Path(root) / "builds"
        self.root.mkdir(mode=0o711, exist_ok=True)
        self.device, self.arch = device, arch
        self.time_limit_s, self.memory_limit = time_limit_s, memory_limit
        self.workers = default_workers(cpus, sharers) if workers is None else max(int(workers), 1)
        # first submitted, first started: the order the pool will evaluate them in (Supervisor.prebuild)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.workers,
                                                           thread_name_prefix="kbenv-build")
        self._builds: dict[str, concurrent.futures.Future] = {}
        self._lock = threading.Lock()

    def key(self, source: str) -> str:
        return hashlib.sha256(f"{self.arch}\0{source}".encode()).hexdigest()

    # ----------------------------------------------------------------------------------------------- submit
    def submit(self, source: str) -> bool:
        """Start building ``source`` unless it needs no build or is built or building; True if it is now."""
        if not needs_build(source):
            return False
        key = self.key(source)
        with self._lock:
            if key not in self._builds:
                self._builds[key] = self._pool.submit(self._build, key, source)
                self._drop_old()
        return True

    def _drop_old(self) -> None:
        done = [k for k, f in self._builds.items() if f.done()]
        for k in done[:max(len(done) - KEEP_BUILDS, 0)]:
            f = self._builds.pop(k)
            tar = None if f.exception() else f.result()
            if tar is not None:
                tar.unlink(missing_ok=True)

    # ------------------------------------------------------------------------------------------------ build
    def _build(self, key: str, source: str) -> Path | None:
        work = Path(tempfile.mkdtemp(prefix="b-", dir=self.root))
        try:
            out = work / "build.tar"  # the builder's one writable host file (its private directory is read-only)
            out.touch()
            (work / "candidate.py").write_text(source, encoding="utf-8")  # Python source is UTF-8, whatever the locale
            as_root = process.root_mode()
            uid = process.sandbox_uid() if as_root else None
            if as_root:
                for path in (work, out):
                    os.chown(path, uid, uid)
            else:
                os.chmod(work, 0o755)
                os.chmod(out, 0o666)
            if not self._run_builder(work, out, uid) or out.stat().st_size == 0:
                return None
            dest = self.root / f"{key}.tar"
            os.replace(out, dest)  # opaque bytes: only the same source's executor unpacks them, in its sandbox
            return dest
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _run_builder(self, work: Path, out: Path, uid: int | None) -> bool:
        """The builder, as ``uid`` (root mode: a sandbox uid of its own) or in a user namespace (None)."""
        as_root = uid is not None
        env = process.sandbox_env(work, "cpu", True)
        env.update(CUDA_VISIBLE_DEVICES="", MAX_JOBS="2")
        if self.arch:
            env["TORCH_CUDA_ARCH_LIST"] = self.arch
        env.update(process.identity_env(uid))
        cmd = process.bwrap_args(work, False, as_root, out_file=str(out)) + [
            sys.executable, "-m", "kbenv.sandbox.builder", str(work / "candidate.py"), str(out)]
        limit, cpus = self.memory_limit, self.cpus

        def limits():
            pin_self(cpus)
            process.sandbox_limits(as_root)
            # the tar of a build (MAX_BUILD_BYTES of files and their headers): the most it may write on the host
            resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_BUILD_BYTES + (64 << 20),) * 2)
            if limit:
                resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))

        proc = subprocess.Popen(cmd, env=env, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, preexec_fn=limits)
        try:
            return proc.wait(timeout=self.time_limit_s) == 0
        except subprocess.TimeoutExpired:
            return False
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()

    # -------------------------------------------------------------------------------------------- install
    def submitted(self, source: str) -> bool:
        with self._lock:
            return needs_build(source) and self.key(source) in self._builds

    def state(self, source: str) -> str:
        """``none`` (no build needed or none submitted), ``building`` (queued or running) or ``done`` (finished,
        built or not): the pool runs a candidate whose build is done before one that would wait for its own."""
        with self._lock:
            fut = self._builds.get(self.key(source)) if needs_build(source) else None
        return "none" if fut is None else "done" if fut.done() else "building"

    def building(self, source: str) -> bool:
        """Whether a build of ``source`` is still in progress (a caller that may give up polls this rather than
        block in :meth:`install`)."""
        return self.state(source) == "building"

    def install(self, source: str, workdir: Path, timeout_s: float) -> str:
        """For the executor about to import ``source``: its finished build copied into the executor's private
        ``workdir`` (waiting up to ``timeout_s`` for one in progress); the file's name, or "" if there is none."""
        with self._lock:
            fut = self._builds.get(self.key(source)) if needs_build(source) else None
        if fut is None:
            return ""
        try:
            tar = fut.result(timeout=max(timeout_s, 0.0))
        except concurrent.futures.TimeoutError:
            return ""
        except Exception:  # noqa: BLE001 - a build that could not run: the executor compiles, as without a farm
            return ""
        if tar is None or not tar.exists():
            return ""
        name = "prebuilt.tar"
        shutil.copyfile(tar, workdir / name)
        os.chmod(workdir / name, 0o644)  # read by the executor's own uid, through its read-only private directory
        return name

    def withdraw(self, source: str) -> bool:
        """A build no longer needed (the decoy's, once its candidate has failed): dropped if it has not started,
        so the builders go to the batch's next candidates. True if it was dropped; one already running finishes."""
        with self._lock:
            key = self.key(source)
            fut = self._builds.get(key) if needs_build(source) else None
            if fut is None or not fut.cancel():
                return False
            del self._builds[key]
            return True

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        shutil.rmtree(self.root, ignore_errors=True)


def pack_build(ext: Path, dest: Path) -> Path | None:
    """The regular files under ``ext`` into the tar ``dest``; None if there are none, too many or too large. Run by
    the builder, inside its sandbox, once the candidate's import has finished (:mod:`kbenv.sandbox.builder`): what
    it writes is untrusted, and bounded from outside (its file size limit). A link, device or fifo is skipped, and
    each file is opened without following a link and checked to be regular before it is read."""
    files, total = [], 0
    for dirpath, dirnames, filenames in os.walk(ext, followlinks=False):
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode) or name == "lock":  # torch's build lock: never carried over
                continue
            files.append((path, st))
            total += st.st_size
            if len(files) > MAX_BUILD_FILES or total > MAX_BUILD_BYTES:
                return None
    if not files:
        return None
    # written in place: the one file the builder's sandbox lets it write (the directory around it is read-only)
    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tar:  # sub-second mtimes: ninja compares them
        for path, st in files:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    continue
                info = tarfile.TarInfo(os.path.relpath(path, ext))
                info.size, info.mtime, info.mode = st.st_size, st.st_mtime, 0o644 | (st.st_mode & 0o111)
                info.pax_headers = {MTIME_NS: str(st.st_mtime_ns)}
                tar.addfile(info, f)
    return dest


def unpack_build(tar_path: str, dest: str) -> None:
    """A build packed by :func:`pack_build` into ``dest`` (the executor's extension directory, in its sandbox, before
    it imports the candidate), every file's mtime restored to the nanosecond.

    Exactly: ninja keeps each object's header dependencies in ``.ninja_deps`` with the object's mtime in ns, and
    treats them as stale (and compiles again) when the object on disk is newer. A tar's mtime is a float of
    seconds (about 0.2 µs of resolution at today's dates), so a restored mtime rounded up by a few hundred ns made
    the executor compile again although the build was there: on the H200, 5 of 6 prebuilt CUDA candidates spent
    24-32 s compiling, the sixth 0.4 s (stop 37)."""
    with tarfile.open(tar_path) as t:
        members = t.getmembers()
        t.extractall(dest, members=members, filter="data")
    for m in members:
        ns = m.pax_headers.get(MTIME_NS)
        if ns is None or not m.isfile():
            continue
        try:
            os.utime(os.path.join(dest, m.name), ns=(int(ns), int(ns)), follow_symlinks=False)
        except (OSError, ValueError):
            pass

"""The fork server (``sandbox/zygote.py``): executors forked from a process that imported torch once, each inside a
bubblewrap sandbox built for it. What must hold is what a spawned executor has (issue 13: "a forked child must not be
able to reach its siblings or the template; check that ptrace and /proc/PID/mem are refused"): its own pid, mount,
network and IPC namespaces, a uid of its own with no capabilities, the sandbox's limits, only its own descriptors,
and nothing of the server in reach. Each test runs a probe as the candidate: its import gathers the facts and raises
them, so they come back in the result's error text."""

import json
import os
import textwrap

import pytest

from kbenv.sandbox import process, zygote
from kbenv.sandbox.result import EvalRequest
from kbenv.sandbox.supervisor import Supervisor

PID = "kernelbench/level1/19"
ROOT = process.root_mode()
pytestmark = pytest.mark.skipif(not ROOT, reason="the fork server serves a root supervisor with bubblewrap")

PROBE = textwrap.dedent('''
    import ctypes, json, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    def attach(pid):  # PTRACE_ATTACH: 0 where it was allowed
        r = libc.ptrace(16, pid, 0, 0)
        return ctypes.get_errno() if r != 0 else 0
    def mem(pid):
        try:
            with open(f"/proc/{pid}/mem", "rb") as f:
                f.read(1)
            return "read"
        except OSError as e:
            return type(e).__name__
    status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
    limits = {l[:26].strip(): l[26:47].strip() for l in open("/proc/self/limits")}
    facts = {
        "pid": os.getpid(), "uid": os.getuid(), "cap_eff": status["CapEff"].strip(),
        "no_new_privs": status["NoNewPrivs"].strip(), "oom_score_adj": open("/proc/self/oom_score_adj").read().strip(),
        "nofile": limits.get("Max open files"), "procs": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        "fds": sorted(int(f) for f in os.listdir("/proc/self/fd")), "cwd": os.getcwd(),
        "main": getattr(sys.modules["__main__"], "__file__", ""), "path0": sys.path[0], "env": sorted(os.environ),
        "ns": {n: os.readlink(f"/proc/self/ns/{n}") for n in ("pid", "mnt", "net", "ipc", "uts")},
        "attach": {p: attach(p) for p in (1, 2)}, "server": SERVER, "server_mem": mem(SERVER) if SERVER else None,
        "server_kill": None,
    }
    if SERVER:
        try:
            os.kill(SERVER, 0)
            facts["server_kill"] = "allowed"
        except OSError as e:
            facts["server_kill"] = type(e).__name__
    raise RuntimeError("FACTS" + json.dumps(facts) + "END")
''')


def _facts(sup: Supervisor, server_pid: int = 0) -> dict:
    r = sup.evaluate(EvalRequest(problem=PID, candidate=f"SERVER = {server_pid}\n" + PROBE, measure_time=False))
    err = r.error or ""
    assert "FACTS{" in err, (r.verdict, r.category, r.reason, err[-2000:])
    start = err.rindex("FACTS{") + 5
    return json.loads(err[start:err.index("}END", start) + 1])


@pytest.fixture
def sup(cache_dir, monkeypatch):
    monkeypatch.setenv("KBENV_FORK_SERVER", "1")
    s = Supervisor(device="cpu", cache_dir=cache_dir, limits={"spawn_s": 30})
    yield s
    s.close()


def test_a_forked_executor_is_alone_in_a_sandbox_of_its_own_with_the_sandboxs_limits(sup):
    a = _facts(sup)
    server = zygote._FORK_SERVERS["cpu"]
    b = _facts(sup, server.proc.pid)
    host = {n: os.readlink(f"/proc/self/ns/{n}") for n in ("pid", "mnt", "net", "ipc", "uts")}
    for f in (a, b):
        assert f["procs"] == [1, 2, f["pid"]], f  # bubblewrap's init, the placeholder, itself: nothing else
        assert f["uid"] in process.SANDBOX_UIDS and f["cap_eff"] == "0000000000000000" and f["no_new_privs"] == "1"
        assert f["oom_score_adj"] == "1000" and f["nofile"] == "1024", f
        assert f["cwd"] == f["path0"] == process.HOME_DIR and f["main"].endswith("executor.py"), f
        assert all(f["ns"][n] != host[n] for n in host), (f["ns"], host)
        # its descriptors: stdio, the two pipes and the lent region, the placeholder's pipe, and what it opened
        assert {0, 1, 2, 3, 4, 5, zygote.LIVE_FD} <= set(f["fds"]) and max(f["fds"]) < 16, f["fds"]
    assert all(a["ns"][n] != b["ns"][n] for n in host), (a["ns"], b["ns"])  # siblings share none
    assert a["uid"] != b["uid"]


def test_a_spawned_executor_has_the_same_sandbox(cache_dir, monkeypatch, sup):
    """The spawn path (cuda's, and a non-root supervisor's) gives the same facts but the process list: bubblewrap's
    init and the executor, no placeholder. Both paths share ``process.bwrap_args`` and ``process.child_limits``;
    this keeps the one CI cannot run forked-only from drifting."""
    forked = _facts(sup)
    monkeypatch.setenv("KBENV_FORK_SERVER", "0")
    s = Supervisor(device="cpu", cache_dir=cache_dir, limits={"spawn_s": 30})
    try:
        f = _facts(s)
    finally:
        s.close()
    assert f["env"] == forked["env"], sorted(set(f["env"]) ^ set(forked["env"]))  # the same variables
    assert len(forked["fds"]) == len(f["fds"]) + 1, (f["fds"], forked["fds"])  # and the placeholder's pipe
    host = {n: os.readlink(f"/proc/self/ns/{n}") for n in ("pid", "mnt", "net", "ipc", "uts")}
    assert f["procs"] == [1, f["pid"]] and f["pid"] == 2, f
    assert f["uid"] in process.SANDBOX_UIDS and f["cap_eff"] == "0000000000000000" and f["no_new_privs"] == "1"
    assert f["oom_score_adj"] == "1000" and f["nofile"] == "1024" and f["cwd"] == f["path0"] == process.HOME_DIR, f
    assert f["main"].endswith("executor.py") and all(f["ns"][n] != host[n] for n in host), f
    assert f["attach"]["1"] == 1, f["attach"]  # its init is root's: refused (EPERM)


def test_neither_the_fork_server_nor_the_sandboxs_own_processes_can_be_traced_or_read(sup):
    """ptrace of the sandbox's init and placeholder (root's) is refused; the server's host pid names nothing in the
    sandbox's /proc and cannot be signalled; and the server shares no writable memory with what it forks and forks
    from a single thread."""
    _facts(sup)  # the server started
    server = zygote._FORK_SERVERS["cpu"]
    f = _facts(sup, server.proc.pid)
    assert f["attach"] == {"1": 1, "2": 1}, f["attach"]  # EPERM
    assert f["server_mem"] in ("FileNotFoundError", "PermissionError") and f["server_kill"] in (
        "ProcessLookupError", "PermissionError"), f
    shared = [line for line in open(f"/proc/{server.proc.pid}/maps") if line.split()[1][1] == "w"
              and line.split()[1][3] == "s"]
    assert shared == [] and server.threads == 1, (shared, server.threads)


def test_a_fork_server_that_died_is_started_again(sup):
    """Killed (the machine's doing, never a candidate's: it is out of every sandbox's reach), the next spawn starts
    another; executors it had forked live on in their sandboxes."""
    _facts(sup)
    server = zygote._FORK_SERVERS["cpu"]
    server.proc.kill()
    server.proc.wait()
    for _ in range(3):  # a spare forked before the kill serves first; the pool's next spawn starts a new server
        f = _facts(sup)
        assert f["procs"] == [1, 2, f["pid"]], f
    assert zygote._FORK_SERVERS["cpu"] is not server and zygote._FORK_SERVERS["cpu"].proc.poll() is None


@pytest.mark.parametrize("flag, device, want", [(None, "cpu", True), (None, "cuda:0", False), ("1", "cuda:0", True),
                                               ("0", "cpu", False)])
def test_the_fork_server_serves_the_cpu_by_default_and_cuda_when_asked(monkeypatch, flag, device, want):
    if flag is None:
        monkeypatch.delenv("KBENV_FORK_SERVER", raising=False)
    else:
        monkeypatch.setenv("KBENV_FORK_SERVER", flag)
    assert zygote.enabled(device) is want


def test_a_request_the_server_cannot_serve_is_a_loud_error_and_the_server_serves_on(sup):
    """A fork into a process that is not a sandbox of its own (here this test's own process), or into none, is refused
    by the server and raised to the supervisor (``process.spawn`` turns it into a SpawnError: the harness's fault,
    never a candidate's); the server answers the next request as before."""
    _facts(sup)
    server = zygote._FORK_SERVERS["cpu"]
    r, w = os.pipe()
    try:
        with pytest.raises(zygote.ForkServerError, match="not in a sandbox of its own"):
            server.fork(os.getpid(), [r], w, w, {}, "/", {})
        with pytest.raises(zygote.ForkServerError):  # nor anywhere without a sandbox named: it forks into one only
            server.fork(None, [r], w, w, {}, "/", {})
    finally:
        os.close(r)
        os.close(w)
    f = _facts(sup)
    assert f["procs"] == [1, 2, f["pid"]] and server.proc.poll() is None

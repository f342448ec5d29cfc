"""The sandbox's own limits that do not need a candidate to show them (the known-bad candidates 19:fill_tmp,
19:thread_bomb, 19:shrink_lent_region and 19:fill_own_pipe show the rest end to end)."""

import pytest

from kbenv.sandbox import process


@pytest.mark.parametrize("release,counts_namespace", [
    ("6.18.44-fc-v1098", True), ("5.14.0-362.el9.x86_64", True), ("5.10.0-28-amd64", False), ("4.19.0", False),
    ("weird", False),
])
def test_a_task_limit_is_set_inside_a_user_namespace_only_where_the_kernel_counts_that_namespace_alone(
        monkeypatch, release, counts_namespace):
    import platform
    monkeypatch.setattr(platform, "release", lambda: release)
    assert process.userns_task_limit() is counts_namespace


def test_the_bubblewrap_arguments_leave_one_bounded_writable_place():
    """Every hidden tmpfs but /tmp, and /dev, are remounted read-only; the private directory is bound read-only; the
    process starts in its home on /tmp, which bubblewrap sizes where it can (and an executor remounts as root)."""
    import os
    from pathlib import Path
    wd = "/tmp/kbenv-sup-x/w-y"
    for as_root in (True, False):
        args = process.bwrap_args(Path(wd), False, as_root=as_root)
        read_only = {args[i + 1] for i, a in enumerate(args) if a == "--remount-ro"}
        assert read_only == {d for d in process.HIDDEN if os.path.isdir(d) and d != "/tmp"} | {"/dev"}
        binds = [(a, args[i + 1]) for i, a in enumerate(args) if a in ("--bind", "--ro-bind") and args[i + 1] == wd]
        assert binds == [("--ro-bind", wd)]
        assert args[args.index("--chdir") + 1] == process.HOME_DIR
        if process.tmpfs_size_flag():
            k = args.index("--size")
            assert args[k + 1:k + 6] == [str(process.WRITE_QUOTA_BYTES), "--perms", "0755", "--tmpfs", "/tmp"]


@pytest.mark.parametrize("trusted", [False, True])
def test_the_host_runs_out_of_memory_on_a_candidates_process_first(trusted):
    """Every process that will run candidate code starts with oom_score_adj 1000 (the OOM killer's first choice,
    inherited by what it starts); a trusted baseline process keeps the supervisor's."""
    import tempfile
    from pathlib import Path
    root = Path(tempfile.mkdtemp())
    p = process.spawn(root, "cpu", "bwrap" if process.have_bwrap() else "none", None, False, trusted=trusted)
    try:
        process.await_ready(p, 120)
        scores = {int(open(f"/proc/{pid}/oom_score_adj").read()) for pid in p.pids()}
        mine = int(open("/proc/self/oom_score_adj").read())
        assert scores == ({mine} if trusted else {1000}), scores
    finally:
        p.kill()


def test_a_sandboxed_process_is_told_its_uid_and_bound_as_root_and_its_task_limit_in_a_user_namespace(monkeypatch):
    """One place (process.identity_env) for executors and builders alike."""
    monkeypatch.setattr(process, "root_mode", lambda: True)
    assert process.identity_env(2_000_000_001) == {
        "KBENV_RUN_AS": "2000000001", "KBENV_TMP_BOUND": f"{process.WRITE_QUOTA_BYTES}:{process.WRITE_QUOTA_FILES}"}
    monkeypatch.setattr(process, "userns_task_limit", lambda: True)
    assert process.identity_env(None) == {"KBENV_TASK_LIMIT": str(process.TASK_LIMIT)}
    monkeypatch.setattr(process, "userns_task_limit", lambda: False)
    assert process.identity_env(None) == {}


def test_a_killed_sandbox_is_reaped_by_its_own_outer_process_not_left_to_the_hosts_init(tmp_path):
    """SIGKILL went to every process of an executor at once, its outer bwrap too, which is its namespace's init's
    parent: the init was left a zombie for whoever adopts orphans, and the namespace stayed listed for 1.0-1.6 s
    after everything in it had gone (the CPU machine, stop 49), waited out by every wait for a dying executor. The
    namespace's processes are killed first; the outer process, which runs no candidate code, reaps its init and
    exits by itself (its status is the init's, not a SIGKILL of its own), and nothing of the namespace is left."""
    if not process.have_bwrap():
        pytest.skip("no bubblewrap on this machine: the sandbox is what this checks")
    p = process.spawn(tmp_path, "cpu", "bwrap", None, False)
    process.await_ready(p, 60)
    assert p.pid_ns and process.pids_in_namespace(p.pid_ns)
    p.kill()
    assert p.proc.returncode != -9, "the outer process was killed, not left to reap its namespace's init"
    assert not process.pids_in_namespace(p.pid_ns, started_by=p.killed_at)

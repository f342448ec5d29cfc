"""The executor's process tree, which the fences stop and lock: walked down from its root through each thread's
``children`` list, with the whole-/proc scan where that list cannot be read."""

import builtins
import subprocess
import sys
import threading
import time

import pytest

from kbenv.sandbox import process as P

# A parent that forks from its main thread (twice, one child forking again) and from a second thread: the tree
# the fence must find is the parent and its four descendants.
FORKS = """
import os, threading, time
def fork_and_sleep():
    if os.fork() == 0:
        time.sleep(60)
threading.Thread(target=fork_and_sleep, daemon=True).start()
if os.fork() == 0:
    if os.fork() == 0:
        time.sleep(60)
    time.sleep(60)
if os.fork() == 0:
    time.sleep(60)
print("ready", flush=True)
time.sleep(60)
"""


@pytest.fixture
def tree():
    root = subprocess.Popen([sys.executable, "-c", FORKS], stdout=subprocess.PIPE, text=True)
    assert root.stdout.readline().strip() == "ready"
    deadline = time.time() + 10
    while len(P._tree_by_scan(root.pid)) < 5 and time.time() < deadline:
        time.sleep(0.02)
    yield root
    for pid in P._tree_by_scan(root.pid)[1:]:
        try:
            P.os.kill(pid, 9)
        except ProcessLookupError:
            pass
    root.kill()
    root.wait()


def test_the_walk_finds_what_the_whole_scan_finds(tree):
    walked, scanned = sorted(P.process_tree(tree.pid)), sorted(P._tree_by_scan(tree.pid))
    assert walked == scanned and len(walked) == 5


def test_the_walk_reads_only_the_trees_own_processes(tree, monkeypatch):
    opened = []
    real_open = builtins.open
    me = threading.get_ident()

    def spy(path, *a, **k):
        if threading.get_ident() == me:  # this test's thread only (a session's Ray client has threads of its own)
            opened.append(str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", spy)
    found = set(P.process_tree(tree.pid))
    read = {int(p.split("/")[2]) for p in opened if p.startswith("/proc/")}
    assert read <= found, f"read /proc entries of processes outside the tree: {sorted(read - found)}"


def test_without_children_lists_the_whole_scan_is_used(tree, monkeypatch):
    real_open = builtins.open

    def no_children(path, *a, **k):
        if str(path).endswith("/children"):
            raise FileNotFoundError(path)  # as on a kernel built without CONFIG_PROC_CHILDREN
        return real_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", no_children)
    assert sorted(P.process_tree(tree.pid)) == sorted(P._tree_by_scan(tree.pid)) and len(P.process_tree(tree.pid)) == 5


def test_an_exited_root_is_its_own_tree():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert P.process_tree(p.pid) == [p.pid]

"""Ahead-of-time extension builds (kbenv.sandbox.builds): a candidate's load_inline compiled by a sandboxed builder
before its turn, and only loaded in its executor; what a builder leaves is never followed or interpreted."""

import os
import tarfile
import textwrap

from kbenv.sandbox import builds
from kbenv.sandbox.builds import pack_build
from kbenv.sandbox.result import EvalRequest
from kbenv.sandbox.supervisor import Supervisor

from test_faults import PID

# A C++ ReLU through load_inline that also tells whether its extension was compiled in this process: its forward
# is wrong (x * 0) if the library is newer than the module's import, right if it was built ahead and only loaded.
CPP_RELU = textwrap.dedent('''
    import glob, os, time
    import torch, torch.nn as nn
    from torch.utils.cpp_extension import load_inline

    _START = time.time()
    _ext = load_inline("kbenv_test_relu", cpp_sources="torch::Tensor relu(torch::Tensor x) { return torch::relu(x); }",
                       functions=["relu"], verbose=False)
    _DIR = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "kbenv_test_relu")
    _COMPILED_HERE = any(os.path.getmtime(f) >= _START for f in glob.glob(os.path.join(_DIR, "*.so")))


    class ModelNew(nn.Module):
        def forward(self, x):
            y = _ext.relu(x.contiguous())
            return y * 0 if _COMPILED_HERE else y
''')


def test_only_sources_that_build_extensions_are_built_ahead():
    assert builds.needs_build(CPP_RELU)
    assert not builds.needs_build("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n")


def test_a_builders_output_is_packed_as_regular_files_only_and_bounded(tmp_path, monkeypatch):
    ext = tmp_path / "ext"
    (ext / "mod").mkdir(parents=True)
    (ext / "mod" / "mod.so").write_bytes(b"\x7fELF" + b"0" * 100)
    (ext / "mod" / "lock").write_text("")  # torch's build lock is never carried into an executor
    os.symlink("/etc/passwd", ext / "mod" / "leak")  # host data through a link: skipped, never read
    os.symlink("/dev/zero", ext / "mod" / "endless")
    os.mkfifo(ext / "mod" / "fifo")  # would block a reader: skipped
    tar = pack_build(ext, tmp_path / "b.tar")
    with tarfile.open(tar) as t:
        assert t.getnames() == ["mod/mod.so"]
        assert t.getmember("mod/mod.so").size == 104
    monkeypatch.setattr(builds, "MAX_BUILD_BYTES", 50)
    assert pack_build(ext, tmp_path / "c.tar") is None  # too large: no build, the executor compiles


# A small extension for the hand-off test: built by torch's cpp_extension.load like any candidate's, but a plain
# CPython module, without torch's headers, so it compiles in seconds on CI's two cores (load_inline's
# torch/extension.h took that test 71 s). The source is written only when absent or different, as load_inline does,
# so an unpacked build stays up to date.
CPP_ONE = textwrap.dedent('''
    import glob, os, time
    import torch, torch.nn as nn
    from torch.utils.cpp_extension import load

    _SRC = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "kbenv_test_one.cpp")
    _CODE = """#include <Python.h>
    static PyObject* one(PyObject*, PyObject*) { return PyLong_FromLong(1); }
    static PyMethodDef M[] = {{"one", one, METH_NOARGS, ""}, {nullptr, nullptr, 0, nullptr}};
    static struct PyModuleDef D = {PyModuleDef_HEAD_INIT, "kbenv_test_one", nullptr, -1, M};
    PyMODINIT_FUNC PyInit_kbenv_test_one(void) { return PyModule_Create(&D); }
    """
    os.makedirs(os.path.dirname(_SRC), exist_ok=True)
    if not os.path.exists(_SRC) or open(_SRC).read() != _CODE:
        with open(_SRC, "w") as f:
            f.write(_CODE)
    _START = time.time()
    _ext = load("kbenv_test_one", sources=[_SRC], verbose=False)
    _DIR = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "kbenv_test_one")
    _COMPILED_HERE = any(os.path.getmtime(f) >= _START for f in glob.glob(os.path.join(_DIR, "*.so")))


    class ModelNew(nn.Module):
        def forward(self, x):
            y = torch.relu(x) * _ext.one()
            return y * 0 if _COMPILED_HERE else y  # wrong if the executor compiled again instead of only loading
''')


def test_an_extension_built_ahead_is_handed_to_the_executor(cache_dir):
    """End to end in the bubblewrap sandbox: the build runs in a builder before the evaluation and the executor
    gets it (``facts.prebuilt``), and only loads it: the candidate is wrong if its library was built in its own
    process (before the exact mtimes of ``unpack_build``, one run in three here compiled again, and 5 of 6 CUDA
    candidates on the H200)."""
    relu = CPP_ONE
    assert builds.needs_build(relu)
    sup = Supervisor(device="cpu", sandbox="bwrap", cache_dir=cache_dir, builders=1, limits={"compile_s": 300})
    try:
        assert sup.prebuild([relu]) == 1  # no kernel to empty: no separate decoy build
        r = sup.evaluate(EvalRequest(problem=PID, candidate=relu))
        assert r.facts["prebuilt"] is True, (r.category, r.reason, r.error)
        assert r.correct, (r.category, r.reason, r.error)
    finally:
        sup.close()


def test_the_pool_starts_a_batchs_builds_on_the_evaluator_that_will_run_them(pool):
    """``EvaluatorPool.map`` hands every source that builds extensions to an evaluator's farm before dispatching
    (Ray's ``build`` concurrency group: it returns while the evaluator is busy), and prefers that evaluator."""
    import ray

    from test_faults import GOOD
    src = "# a comment naming load_inline is enough to be built ahead (nothing to compile here)\n" + GOOD
    reqs = [EvalRequest(problem=PID, candidate=src), EvalRequest(problem=PID, candidate=GOOD)]
    home = pool._prebuild(list(enumerate(reqs)))
    assert list(home) == [0] and home[0] is pool.actors[0]
    assert ray.get(pool._build_refs) == [1]
    results = dict(pool.map(reqs))
    assert [results[i].verdict for i in (0, 1)] == ["pass", "pass"]
    assert results[0].facts["prebuilt"] is False  # the build left no library: the executor imported as usual



def test_a_build_is_unpacked_with_every_mtime_exact_to_the_nanosecond(tmp_path):
    """ninja's deps log holds each object's mtime in ns and compiles again when the file on disk is newer: a float
    of seconds (a tar's mtime) rounds it, so the exact value travels in the tar's pax header."""
    ext = tmp_path / "ext"
    (ext / "mod").mkdir(parents=True)
    files = {"mod/a.o": 1_764_000_000_123_456_789, "mod/mod.so": 1_764_000_001_987_654_321}
    for name, ns in files.items():
        (ext / name).write_bytes(b"x" * 10)
        os.utime(ext / name, ns=(ns, ns))
    tar = pack_build(ext, tmp_path / "b.tar")
    dest = tmp_path / "dest"
    dest.mkdir()
    builds.unpack_build(str(tar), str(dest))
    assert {name: os.stat(dest / name).st_mtime_ns for name in files} == files


def test_a_batchs_builds_are_submitted_in_its_order_each_candidates_before_its_decoys():
    """The farm runs builds first submitted, first started, and the pool evaluates in the batch's order: the first
    candidate's build must be the first to start (stop 36: a set's order started them at random, and the first
    evaluation waited 99 s behind others' builds)."""
    from kbenv.sandbox import decoy

    class Recorder:
        def __init__(self):
            self.order = []

        def submit(self, src):
            self.order.append(src)
            return True

    sources = [CPP_RELU.replace("kbenv_test_relu", f"kbenv_test_relu{k}") for k in range(6)]
    sources += [sources[2]]  # a repeat is built once
    sup = Supervisor.__new__(Supervisor)  # prebuild reads only the farm
    sup.builds = Recorder()
    assert sup.prebuild(sources) == len(sup.builds.order)
    expected = []
    for src in sources[:6]:
        noop, kernels = decoy.noop_kernels(src)
        expected += [src] + ([noop] if kernels else [])
    assert sup.builds.order == expected


def test_concurrent_builds_follow_the_background_cores():
    """A builder per four background cores (shared by the lanes of a GPU), at least one; two where unknown."""
    assert builds.default_workers(tuple(range(12))) == 3
    assert builds.default_workers(tuple(range(12)), sharers=2) == 1
    assert builds.default_workers(tuple(range(2))) == 1
    assert builds.default_workers(tuple(range(28))) == 7
    assert builds.default_workers(None) == 2


def test_an_idle_evaluator_runs_a_request_whose_build_is_done_before_one_that_would_wait():
    from kbenv.sandbox.actor import pick_next
    cu = [f"# load_inline {k}" for k in range(3)]
    triton = "import triton  # no extension"
    # its own requests 0-2, the first still building: the second, done, goes first
    assert pick_next(cu, [0, 1, 2], ["building", "done", "building"]) == 1
    # all its own still building, a request with no build behind them: that one
    assert pick_next(cu + [triton], [0, 1, 2], ["building"] * 3) == 3
    # nothing else to run: the first of its own (its compile phase waits for the build)
    assert pick_next(cu, [1, 2], ["building", "building"]) == 1
    # no builds of its own and every request needs one elsewhere: the first
    assert pick_next(cu, [], []) == 0
    # a failed or absent build counts as done: the executor compiles, no point waiting
    assert pick_next(cu, [0, 2], ["building", "none"]) == 2


def test_a_build_not_yet_started_is_withdrawn_and_a_running_one_finishes(tmp_path, monkeypatch):
    """A decoy's build is not needed once its candidate failed: one still queued is dropped (the builders go to
    the batch's next candidates), one already running is left to finish."""
    import threading

    farm = builds.BuildFarm(tmp_path, "cpu", None, 60.0, None, workers=1)
    started, release = threading.Event(), threading.Event()

    def slow_build(key, source):
        started.set()
        release.wait(30)
        return None
    monkeypatch.setattr(farm, "_build", slow_build)
    try:
        first, second = "# load_inline 1\n", "# load_inline 2\n"
        assert farm.submit(first) and farm.submit(second)
        assert started.wait(10)
        assert farm.withdraw(second) is True and not farm.submitted(second)  # queued behind the first: dropped
        assert farm.withdraw(first) is False and farm.submitted(first)  # running: it finishes
        assert farm.withdraw("# no build needed\n") is False
    finally:
        release.set()
        farm.close()


def test_a_failed_candidates_decoy_build_is_withdrawn(cache_dir, monkeypatch):
    """End to end on the CPU: a candidate that fails correctness withdraws its decoy's build (the no-op rewrite
    the supervisor submitted at its start); a passing one does not."""
    from kbenv.sandbox import decoy
    from test_faults import GOOD
    wrong = GOOD.replace("return", "return 2 *", 1) if "return" in GOOD else None
    assert wrong is not None
    sup = Supervisor(device="cpu", cache_dir=cache_dir, builders=1)
    withdrawn = []
    try:
        monkeypatch.setattr(sup.builds, "withdraw", lambda source: withdrawn.append(source) or False)
        r = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD, measure_time=False))
        assert r.verdict == "pass", (r.category, r.reason, r.error)
        assert withdrawn == []
        r = sup.evaluate(EvalRequest(problem=PID, candidate=wrong, measure_time=False))
        assert r.verdict != "pass"
        noop, kernels = decoy.noop_kernels(wrong)
        assert (withdrawn == [noop]) if kernels else (withdrawn == []), (kernels, withdrawn)
    finally:
        sup.close()

"""Every candidate fault is a typed result with a clear reason, and the next evaluation on the same supervisor
works. Candidates here are written for problem 19 (ReLU) at the CPU size."""

import textwrap

import pytest

from kbenv.sandbox.result import EvalRequest

PID = "kernelbench/level1/19"

GOOD = textwrap.dedent('''
    import torch, torch.nn as nn, triton, triton.language as tl

    @triton.jit
    def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=m)

    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
        def forward(self, x):
            x = x.contiguous()
            y = torch.empty_like(x)
            n = x.numel()
            relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
            return y
''')


def with_forward(body: str, prelude: str = "") -> str:
    """A candidate whose forward runs ``body`` before the real kernel (returns the kernel's output)."""
    src = GOOD.replace("        x = x.contiguous()\n", textwrap.indent(textwrap.dedent(body), " " * 8)
                       + "        x = x.contiguous()\n")
    return prelude + src


CASES = {
    "syntax_error": ("class ModelNew(nn.Module:\n    pass\n", "compile"),
    "missing_modelnew": ("import torch\nclass Model(torch.nn.Module):\n    pass\n", "compile"),
    "import_error": ("import torch\nimport no_such_module_kbenv\nclass ModelNew(torch.nn.Module):\n    pass\n", "compile"),
    "constructor_raises": (GOOD.replace("super().__init__()", "super().__init__(); raise RuntimeError('ctor')"),
                           "compile"),
    "forward_raises": (with_forward("raise ValueError('boom')\n"), "runtime"),
    "wrong_shape": (GOOD.replace("return y", "return y[:1]"), "wrong_shape"),
    "wrong_dtype": (GOOD.replace("return y", "return y.double()"), "wrong_type"),
    "nan_output": (GOOD.replace("return y", "return y * float('nan')"), "nonfinite"),
    "segfault": (with_forward("import ctypes; ctypes.string_at(0)\n"), "crash"),
    "os_exit": (with_forward("import os; print('PASS'); os._exit(0)\n"), "crash"),
    "abort": (with_forward("import os; os.abort()\n"), "crash"),
    "python_hang": (with_forward("while True: pass\n"), "timeout"),
    "sleep_at_import": ("import time\ntime.sleep(10**6)\n" + GOOD, "timeout"),
    "host_oom": (with_forward("b = bytearray(64 << 30)\n"), "oom"),
    "tensor_oom": (with_forward("t = torch.empty(1 << 40, dtype=torch.uint8, device=x.device)\n"), "oom"),
    "kill_self": (with_forward("import os, signal; os.kill(os.getpid(), signal.SIGKILL)\n"), "crash"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fault_is_typed_and_next_evaluation_works(supervisor, name, monkeypatch):
    src, category = CASES[name]
    # the deadline is what these test: a short one (CI time), this case only (an honest import or correctness phase
    # takes well under a second on the CPU)
    if name == "sleep_at_import":
        monkeypatch.setitem(supervisor.limits, "compile_s", 4.0)
    if name == "python_hang":
        monkeypatch.setitem(supervisor.limits, "trial_s", 4.0)
    res = supervisor.evaluate(EvalRequest(problem=PID, candidate=src, size="small", measure_time=False))
    assert res.verdict == "fail", res.reason
    assert res.category == category, (res.category, res.reason, res.error)
    assert res.reward == 0.0
    assert res.reason
    monkeypatch.undo()  # the next evaluation under the session's own limits
    good = supervisor.evaluate(EvalRequest(problem=PID, candidate=GOOD, size="small", measure_time=False))
    assert good.verdict == "pass", (good.category, good.reason, good.error)


def test_fork_children_do_not_outlive_the_evaluation(supervisor):
    import subprocess
    import uuid
    probe = f"kbenv-fork-probe-{uuid.uuid4().hex}"
    src = with_forward(f'''
import os, sys
if os.fork() == 0:
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", "{probe}"])
''')
    res = supervisor.evaluate(EvalRequest(problem=PID, candidate=src, size="small", measure_time=False))
    assert res.verdict == "pass", res.reason  # the forking parent still returns a correct output
    supervisor.pool.join()  # every process of the sandbox was SIGKILLed when the result returned
    left = subprocess.run(["pgrep", "-f", probe], capture_output=True, text=True).stdout.split()
    assert left == [], f"forked child outlived the evaluation: {left}"


@pytest.mark.parametrize("attack,check", [
    ("network", "import socket\ns = socket.socket()\ns.settimeout(2)\ns.connect(('1.1.1.1', 80))\n"),
    ("write_outside", "open('/work_kbenv_probe', 'w').write('x')\n"),
    ("write_tmp", "open('/tmp/kbenv_probe', 'w').write('x')\n"),
    ("write_home_of_root", "open('/root/kbenv_probe', 'w').write('x')\n"),
])
def test_sandbox_blocks(supervisor, attack, check):
    """The candidate returns zeros if the forbidden action SUCCEEDED and the right answer if it was blocked."""
    body = "try:\n" + textwrap.indent(check, "    ") + "    leaked = True\nexcept Exception:\n    leaked = False\n"
    src = GOOD.replace("        return y\n", "        if LEAKED:\n            return torch.zeros_like(y)\n"
                       "        return y\n")
    src = src.replace("class ModelNew", body.replace("leaked", "LEAKED") + "\nclass ModelNew")
    if supervisor.sandbox != "bwrap":
        pytest.skip("bubblewrap is not installed here; .ci/run installs it")
    res = supervisor.evaluate(EvalRequest(problem=PID, candidate=src, size="small", measure_time=False))
    assert res.verdict == "pass", (attack, res.category, res.reason, res.error)

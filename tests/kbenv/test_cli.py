import json
import subprocess
import sys

import pytest

from kbenv.agents.scripted import KnownGoodPolicy
from kbenv.prompts import extract_code

from kbfakes import GOOD, FakePool, SuiteFakePool

PID = "kernelbench/level1/19"


def kbenv(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "kbenv.cli", *args], capture_output=True, text=True, timeout=timeout)


def run_main(capsys, *argv):
    """The CLI in this process: (exit status, stdout, stderr)."""
    from kbenv.cli import main
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def good_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("k") / "good.py"
    p.write_text(extract_code(KnownGoodPolicy().act({"problem_id": PID})))
    return p


def test_eval_json(good_file, tmp_path):
    r = kbenv("eval", "--problem", PID, "--kernel", str(good_file), "--json", "--device", "cpu")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for k in ("problem", "verdict", "correct", "reward", "speedup", "checks", "timings", "error"):
        assert k in d
    assert d["verdict"] == "pass" and d["correct"] and d["timings"]["median_ms"] > 0


def test_eval_candidate_fault_exits_zero(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nos._exit(3)\n")
    r = kbenv("eval", "--problem", PID, "--kernel", str(bad), "--json", "--device", "cpu")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["verdict"] == "fail" and d["category"] == "crash" and d["reward"] == 0


def test_bad_usage_exits_two_with_one_line_and_no_traceback(good_file):
    r = kbenv("eval", "--problem", "no/such/problem", "--kernel", str(good_file))
    assert r.returncode == 2 and "--problem" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = kbenv("frobnicate")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "frobnicate" in r.stderr


def test_problems_show():
    r = kbenv("problems", "show", "kernelbench/level1/23", "--json")
    d = json.loads(r.stdout)
    assert d["family"] == "softmax" and d["shapes"]["full"] == [[4096, 393216]] and "class Model" in d["source"]
    assert d["floor"]["float_elements"] == 2 * 4096 * 393216


# -- issue 15: a newcomer's edges ---------------------------------------------------------------------------------

def test_version_prints_the_package_version(capsys):
    import kbenv
    with pytest.raises(SystemExit) as e:
        run_main(capsys, "--version")
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"kbenv {kbenv.__version__}"


def _subparsers(parser):
    import argparse
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                yield from ((f"{name} {n}", s) for n, s in _subparsers(sub))


def test_every_subcommand_has_a_description_and_every_option_a_help_text():
    from kbenv.cli import build_parser
    subs = dict(_subparsers(build_parser()))
    assert {"demo", "eval", "redteam", "rollout", "report", "export", "profile", "baselines", "audit"} <= set(subs)
    for name, sub in subs.items():
        assert sub.description, f"kbenv {name} has no description"
        for action in sub._actions:
            assert action.help, f"kbenv {name}: {action.option_strings or action.dest} has no help"


def test_option_help_shows_defaults_and_eval_help_lists_exit_codes(capsys):
    with pytest.raises(SystemExit):
        run_main(capsys, "eval", "--help")
    out = capsys.readouterr().out
    assert "(default: amdahl)" in out and "(default: auto)" in out
    for code in ("0 ", "1 ", "2 ", "141"):
        assert f"\n  {code}" in out
    assert "usage or environment mistake" in out and "harness fault" in out


@pytest.mark.parametrize("argv, names", [
    (["eval", "--problem", PID, "--kernel", "/no/such/file.py"], "--kernel /no/such/file.py"),
    (["eval", "--problem", "kernelbench/level1/999", "--kernel", "GOOD"], "--problem"),
    (["eval", "--problem", PID, "--kernel", "GOOD", "--limit", "compile"], "--limit"),
    (["eval", "--problem", PID, "--kernel", "GOOD", "--limit", "link=3"], "--limit"),
    (["eval", "--problem", PID, "--kernel", "GOOD", "--limit", "trial=abc"], "--limit"),
    (["audit", "--ids", "abc"], "--ids"),
    (["rollout", "--policy", "openai", "--problems", PID], "--policy-kwargs"),
    (["rollout", "--policy", "known-good", "--policy-kwargs", "{not json", "--problems", PID], "--policy-kwargs"),
    (["rollout", "--policy", "no.such.module:Policy", "--problems", PID], "--policy"),
    (["rollout", "--policy", "known-good", "--problems", "kernelbench/level1/999"], "--problems"),
    (["rollout", "--policy", "known-good", "--chat", "tree", "--problems", PID], "--chat"),
    (["report", "NORUN"], "NORUN"),
    (["export", "NORUN", "OUT"], "NORUN"),
    (["project", "NORUN", "--profile", "dlrm_infer"], "NORUN"),
    (["demo", "--problems", "kernelbench/level1/999"], "--problems"),
])
def test_usage_mistakes_exit_two_with_one_line_naming_the_flag_or_file(capsys, tmp_path, good_file, argv, names,
                                                                        monkeypatch):
    import kbenv.sandbox.actor as actor
    monkeypatch.setattr(actor, "EvaluatorPool", lambda **kw: FakePool())
    argv = [str(good_file) if a == "GOOD" else str(tmp_path / a) if a in ("NORUN", "OUT") else a for a in argv]
    names = str(tmp_path / names) if names == "NORUN" else names
    code, out, err = run_main(capsys, *argv)
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and names in err and "Traceback" not in err


def test_debug_adds_the_traceback_of_a_usage_error(capsys, tmp_path):
    code, _, err = run_main(capsys, "report", str(tmp_path / "none"), "--debug")
    assert code == 2 and "Traceback" in err and "RunNotFound" in err


def test_non_utf8_kernel_file_is_named(capsys, tmp_path):
    k = tmp_path / "latin1.py"
    k.write_bytes("# caf\xe9\nclass ModelNew: pass\n".encode("latin-1"))
    code, _, err = run_main(capsys, "eval", "--problem", PID, "--kernel", str(k))
    assert code == 2 and str(k) in err and "UTF-8" in err and "0xe9" in err


def test_cuda_asked_for_without_a_gpu_exits_two(capsys, good_file, monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, _, err = run_main(capsys, "eval", "--problem", PID, "--kernel", str(good_file), "--device", "cuda")
    assert code == 2 and "--device" in err and "no visible CUDA GPU" in err


def test_an_unreachable_policy_server_exits_two_in_one_line(capsys, monkeypatch, tmp_path):
    import socket

    import kbenv.sandbox.actor as actor
    monkeypatch.setattr(actor, "EvaluatorPool", lambda **kw: FakePool())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    kwargs = json.dumps({"base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "max_retries": 0,
                         "timeout_s": 2})
    code, _, err = run_main(capsys, "rollout", "--policy", "openai", "--policy-kwargs", kwargs, "--problems", PID,
                            "--turns", "1", "--out", str(tmp_path / "run"), "--no-progress", "--device", "cpu")
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"127.0.0.1:{port}" in err


def test_a_harness_fault_exits_one_with_its_traceback(capsys, monkeypatch, good_file):
    import kbenv.sandbox.supervisor as supervisor

    class Broken:
        def __init__(self, **kwargs):
            raise RuntimeError("reference missing")
    monkeypatch.setattr(supervisor, "Supervisor", Broken)
    code, _, err = run_main(capsys, "eval", "--problem", PID, "--kernel", str(good_file), "--device", "cpu")
    assert code == 1 and "Traceback" in err and "reference missing" in err


def test_closed_output_pipe_exits_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "kbenv.cli", "problems", "list"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before kbenv writes (as `| head` after its lines)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and "Traceback" not in err and "BrokenPipe" not in err


def test_eval_limit_flags_reach_the_supervisor(capsys, monkeypatch, good_file):
    import kbenv.sandbox.supervisor as supervisor
    seen = {}

    class Recording:
        def __init__(self, **kwargs):
            seen.update(kwargs)

        def evaluate(self, req):
            return FakePool().evaluate(req)

        def close(self):
            seen["closed"] = True
    monkeypatch.setattr(supervisor, "Supervisor", Recording)
    code, out, _ = run_main(capsys, "eval", "--problem", PID, "--kernel", str(good_file), "--device", "cpu",
                            "--limit", "compile=30", "--limit", "timing=90.5", "--limit", "trial=5", "--json")
    assert code == 0 and json.loads(out)["problem"] == PID
    assert seen["limits"] == {"compile_s": 30.0, "timing_s": 90.5, "trial_s": 5.0} and seen["closed"]
    assert seen["timing"] is None  # the sandbox's own timing plan
    seen.clear()
    code, _, _ = run_main(capsys, "eval", "--problem", PID, "--kernel", str(good_file), "--device", "cpu",
                          "--timing-budget", "1.5", "--json")
    assert code == 0 and seen["timing"] == {"budget_s": 1.5}
    code, _, err = run_main(capsys, "eval", "--problem", PID, "--kernel", str(good_file), "--device", "cpu",
                            "--timing-budget", "-1")
    assert code == 2 and "--timing-budget" in err


def test_memory_preflight_refusal_exits_two_naming_the_size(capsys, monkeypatch, good_file):
    from kbenv import step

    def refuse(problem, size, precision, device):
        raise step.MemoryPlanError(f"{problem.id} at size {size} needs 31.0 GiB, this device has 24.0 GiB; "
                                   "use --size medium", None, "medium")
    monkeypatch.setattr(step, "_memplan_preflight", refuse)
    code, _, err = run_main(capsys, "eval", "--problem", PID, "--kernel", str(good_file), "--device", "cpu",
                            "--size", "full")
    assert code == 2 and "use --size medium" in err and len(err.strip().splitlines()) == 1
    from kbenv.env import KernelEnv
    with pytest.raises(step.MemoryPlanError, match="medium"):
        KernelEnv(problems=[PID], evaluator=FakePool(), size="full")
    assert issubclass(step.MemoryPlanError, ValueError)


def _patch_pool(monkeypatch, factory):
    import kbenv.sandbox.actor as actor
    made = []

    def make(**kwargs):
        made.append(kwargs)
        pool = factory(kwargs.get("device", "cpu"))
        pool.kwargs = kwargs
        return pool
    monkeypatch.setattr(actor, "EvaluatorPool", make)
    return made


def test_redteam_prints_expected_and_got_and_exits_zero_when_all_match(capsys, monkeypatch):
    made = _patch_pool(monkeypatch, lambda d: SuiteFakePool(d, honest=True))
    code, out, err = run_main(capsys, "redteam", "--device", "cpu", "--sandbox", "bwrap", "--limit", "trial=7",
                              "--only", "kernelbench/level1/23:")
    assert code == 0, out + err
    assert made[0]["config"] == {"sandbox": "bwrap", "limits": {"trial_s": 7.0}}
    assert "expected" in out and "got" in out and "0 mismatches" in out and "kernelbench/level1/23:" in out
    assert "redteam" in err  # the progress bar


def test_redteam_without_progress_bar_logs_every_row_as_it_arrives(capsys, monkeypatch):
    _patch_pool(monkeypatch, lambda d: SuiteFakePool(d, honest=True))
    code, out, err = run_main(capsys, "redteam", "--device", "cpu", "--only", "kernelbench/level1/23:", "--no-progress")
    rows = [line for line in out.splitlines() if line.startswith("[")]
    assert code == 0 and rows and rows[0].startswith("[1/") and all(" ok" in r for r in rows)
    assert "redteam" not in err  # no bar


def test_redteam_keeps_every_result_whole_as_records_with_out(capsys, monkeypatch, tmp_path):
    """``kbenv redteam --out DIR``: every result, facts and phase splits included, as records (a slow or odd row on
    the GPU machine can then be explained; stop 45 had a known-good row take 182 s under lanes, with nothing kept)."""
    from kbenv.records import read_records
    _patch_pool(monkeypatch, lambda d: SuiteFakePool(d, honest=True))
    run = tmp_path / "rt"
    code, out, _ = run_main(capsys, "redteam", "--device", "cpu", "--only", "kernelbench/level1/23:", "--no-progress",
                            "--out", str(run))
    rows = [line for line in out.splitlines() if line.startswith("[")]
    records = read_records(run)
    assert code == 0 and rows and len(records) == len(rows), (len(records), len(rows))
    assert all(r["problem"] == "kernelbench/level1/23" and "phase_seconds" in r for r in records), records[0].keys()
    code, _, _ = run_main(capsys, "redteam", "--device", "cpu", "--only", "kernelbench/level1/23:", "--no-progress",
                          "--out", str(run))
    assert code == 0 and len(read_records(run)) == len(rows)  # replaced, not appended
    code, _, err = run_main(capsys, "export", str(run), str(tmp_path / "rt.jsonl"))  # as gpu_run.sh's redteam stage
    assert code == 0 and len((tmp_path / "rt.jsonl").read_text().splitlines()) == len(rows), err


def test_redteam_exits_three_on_a_mismatch(capsys, monkeypatch):
    _patch_pool(monkeypatch, lambda d: SuiteFakePool(d, honest=False))
    code, out, _ = run_main(capsys, "redteam", "--device", "cpu", "--only", "kernelbench/level1/23:", "--no-progress")
    assert code == 3 and "MISMATCH" in out


def test_rollout_evaluators_and_limits_reach_the_pool(capsys, monkeypatch, tmp_path):
    made = _patch_pool(monkeypatch, lambda d: FakePool(d))
    code, out, err = run_main(capsys, "rollout", "--policy", "known-good", "--problems", PID, "--turns", "1",
                              "--evaluators", "3", "--limit", "compile=11", "--out", str(tmp_path / "r"),
                              "--device", "cpu", "--no-progress")
    assert code == 0, err
    assert made[0]["n"] == 3 and made[0]["config"] == {"limits": {"compile_s": 11.0}}
    code, _, err = run_main(capsys, "rollout", "--policy", "known-good", "--problems", PID, "--turns", "1",
                            "--timing-budget", "0.75", "--out", str(tmp_path / "r2"), "--device", "cpu",
                            "--no-progress")
    assert code == 0, err
    assert made[1]["config"] == {"timing": {"budget_s": 0.75}}


def test_demo_problems_narrow_both_parts_and_both_are_saved(capsys, monkeypatch, tmp_path):
    from kbenv.records import read_records
    _patch_pool(monkeypatch, lambda d: SuiteFakePool(d))
    out_dir = tmp_path / "demo"
    code, out, err = run_main(capsys, "demo", "--problems", "kernelbench/level1/23", "--out", str(out_dir),
                              "--device", "cpu")
    assert code == 0, err
    good, bad = read_records(out_dir / "known-good"), read_records(out_dir / "known-bad")
    assert [r["problem"] for r in good] == ["kernelbench/level1/23"]
    assert len(bad) >= 3 and {r["problem"] for r in bad} == {"kernelbench/level1/23"}
    suite = json.loads((out_dir / "known-bad" / "suite.json").read_text())
    assert {r["candidate"].rsplit(":", 1)[0] for r in suite["rows"]} == {"kernelbench/level1/23"}
    assert "rollout evaluations" in err and "known-bad suite" in err  # both progress bars
    code, out, _ = run_main(capsys, "report", str(out_dir / "known-bad"))
    assert code == 0 and "failure" in out.lower()


def test_export_carries_texts_and_verified_only_writes_sft_rows(capsys, monkeypatch, tmp_path):
    _patch_pool(monkeypatch, lambda d: FakePool(d))
    run = tmp_path / "run"
    from kbenv.rollout import RolloutConfig, run_rollout
    from kbenv.agents.scripted import EchoPolicy
    run_rollout(RolloutConfig(problems=PID, turns=1, out=str(run), progress=False, device="cpu"),
                pool=FakePool(), policy=EchoPolicy("prose first\n" + GOOD))
    run_rollout(RolloutConfig(problems="kernelbench/level1/21", turns=1, out=str(tmp_path / "r2"), progress=False,
                              device="cpu"), pool=FakePool(), policy=EchoPolicy("no code"))
    code, _, _ = run_main(capsys, "export", str(run), str(tmp_path / "all.jsonl"))
    rec = json.loads((tmp_path / "all.jsonl").read_text().splitlines()[0])
    assert code == 0 and rec["texts"]["reply"] == "prose first\n" + GOOD
    assert rec["texts"]["candidate"].startswith("import torch") and "texts_zlib" not in rec
    assert rec["texts"]["messages"][1]["role"] == "user" and "class Model" in rec["texts"]["messages"][1]["content"]
    code, out, _ = run_main(capsys, "export", str(run), str(tmp_path / "sft.jsonl"), "--verified-only")
    row = json.loads((tmp_path / "sft.jsonl").read_text())
    assert code == 0 and "1 prompt/completion rows" in out
    assert row["prompt"][0]["role"] == "system" and row["completion"] == [
        {"role": "assistant", "content": "prose first\n" + GOOD}] and row["problem_id"] == PID
    code, out, _ = run_main(capsys, "export", str(tmp_path / "r2"), str(tmp_path / "none.jsonl"), "--verified-only")
    assert code == 0 and (tmp_path / "none.jsonl").read_text() == ""


def test_profile_shows_a_ticking_progress_line_while_it_works(capsys, monkeypatch, tmp_path):
    import time

    import kbenv.rewards.profiler as profiler

    def slow_profile(name, mode, device="cuda", size="full", **kw):
        time.sleep(1.5)
        return {"name": f"{name}-{mode}", "buckets": {}, "addressable_fraction": 0.5, "unclassified_fraction": 0.0}
    monkeypatch.setattr(profiler, "profile_workload", slow_profile)
    monkeypatch.setattr(profiler, "save_profile", lambda prof, path=None: tmp_path / "p.json")
    code, out, err = run_main(capsys, "profile", "gpt", "--mode", "infer", "--device", "cpu", "--size", "tiny")
    assert code == 0 and '"addressable_fraction": 0.5' in out
    assert "profiling gpt (infer, cpu)" in err and "elapsed" in err
    code, _, err = run_main(capsys, "profile", "gpt", "--mode", "infer", "--device", "cpu", "--no-progress")
    assert code == 0 and "profiling" not in err


def _fake_baselines(monkeypatch, get=None) -> list:
    """``kbenv baselines build`` against a supervisor whose baselines answer at once; returns the (problem, size)
    pairs asked for. ``get(problem, size)`` may raise (a plan that does not fit)."""
    import kbenv.sandbox.baseline_figures as figures
    import kbenv.sandbox.supervisor as supervisor
    asked = []

    def measure_alone(sup, p, size, precision):
        assert isinstance(sup, FakeSupervisor)
        if get is not None:
            get(p, size)
        asked.append((p.id, size))
        return {"eager_ms": 1.0, "compile_ms": 0.5, "best": "compile"}

    class FakeSupervisor:
        def __init__(self, **kwargs):
            pass

        def close(self):
            pass
    monkeypatch.setattr(supervisor, "Supervisor", FakeSupervisor)
    monkeypatch.setattr(figures, "measure_alone", measure_alone)
    return asked


def test_baselines_show_progress_per_problem(capsys, monkeypatch):
    _fake_baselines(monkeypatch)
    code, out, err = run_main(capsys, "baselines", "build", "--set", "dlrm", "--ids", "1-3", "--device", "cpu")
    assert code == 0 and out.count("best compile") == 3 and "baselines" in err and "3/3" in err


def test_redteam_and_demo_refuse_a_size_that_does_not_fit_before_starting_anything(capsys, monkeypatch):
    from kbenv import step
    made = _patch_pool(monkeypatch, lambda d: SuiteFakePool(d))

    def refuse(problem, size, precision, device):
        raise step.MemoryPlanError(f"{problem.id} at --size {size} does not fit: use --size small", None, "small")
    monkeypatch.setattr(step, "_memplan_preflight", refuse)
    for argv in (["redteam", "--device", "cpu", "--size", "full"], ["demo", "--device", "cpu", "--size", "full"]):
        code, _, err = run_main(capsys, *argv)
        assert code == 2 and "use --size small" in err, argv
    assert made == []  # no evaluator was started


def test_baselines_build_at_the_largest_size_picks_each_problems_size_as_a_rollout_does(capsys, monkeypatch):
    """``kbenv baselines build --size largest`` builds each problem at the size ``kbenv rollout --size largest``
    evaluates it at (so that the rollout finds them built); a problem that fits no size is skipped, named; so is
    one whose plan does not fit at the size asked for, and the others are still built."""
    from kbenv import step

    def get(p, size):
        if p.id == "dlrm/2" and size == "full":
            raise step.MemoryPlanError("dlrm/2 does not fit at full")
    asked = _fake_baselines(monkeypatch, get)
    code, out, err = run_main(capsys, "baselines", "build", "--set", "dlrm", "--ids", "1-2", "--device", "cpu",
                              "--size", "full")
    assert code == 0 and asked == [("dlrm/1", "full")] and "dlrm/2: skipped: dlrm/2 does not fit" in err, (asked, err)
    asked.clear()
    fits = {"dlrm/1": "full", "dlrm/2": "medium", "dlrm/3": None}
    monkeypatch.setattr(step, "largest_size", lambda pid, precision, device: fits[pid])
    code, out, err = run_main(capsys, "baselines", "build", "--set", "dlrm", "--ids", "1-3", "--device", "cpu",
                              "--size", "largest")
    assert code == 0 and asked == [("dlrm/1", "full"), ("dlrm/2", "medium")], asked
    assert "dlrm/3: no size fits" in err
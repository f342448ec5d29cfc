"""Scripted policies over a temporary problems tree, plus a parse of the installed one."""

from __future__ import annotations

import importlib.resources
import textwrap
from pathlib import Path

import pytest

from kbenv.agents import (
    EchoPolicy,
    KnownBadPolicy,
    KnownGoodPolicy,
    MissingSolutionError,
    known_bad_suite,
    parse_expectations,
)

GOOD_SOFTMAX = textwrap.dedent(
    """\
    import torch

    class ModelNew(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=1)
    """
)


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def problems_root(tmp_path: Path) -> Path:
    """A fake problems tree: two KernelBench problems and one DLRM problem with solutions."""
    write(tmp_path, "kernelbench/solutions/23/correct/b_second.py", "class ModelNew: pass  # second\n")
    write(tmp_path, "kernelbench/solutions/23/correct/a_first.py", GOOD_SOFTMAX)
    write(tmp_path, "kernelbench/solutions/23/wrong/zeros.py", "# expect: inaccurate|invariant\nclass ModelNew: pass\n")
    write(
        tmp_path,
        "kernelbench/solutions/23/wrong/side_stream.py",
        "# expect: timing_escape\n# expect-cpu: pass\n# gpu-only\nclass ModelNew: pass\n",
    )
    write(tmp_path, "kernelbench/solutions/5/correct/triton.py", "class ModelNew: pass  # five\n")
    write(tmp_path, "kernelbench/solutions/5/correct/__init__.py", "")
    write(tmp_path, "kernelbench/solutions/40/wrong/partial.py", "# expect: unwritten\nclass ModelNew: pass\n")
    write(
        tmp_path,
        "dlrm/solutions/1/wrong/net.py",
        "# expect: sandbox_violation|runtime\n# expect-sandbox: sandbox_violation\n# expect-cuda: crash\n"
        "import socket\nclass ModelNew: pass\n",
    )
    write(tmp_path, "dlrm/solutions/1/correct/embed.py", "class ModelNew: pass  # dlrm\n")
    (tmp_path / "dlrm/solutions/2/correct").mkdir(parents=True)  # empty: no solution
    write(tmp_path, "dlrm/solutions/notes/correct/x.py", "")  # not a problem folder
    return tmp_path


def obs(problem_id: str, turn: int = 0) -> dict:
    return {"prompt": "...", "system": "...", "problem_id": problem_id, "turn": turn, "feedback": ""}


def code_block(reply: str) -> str:
    assert reply.startswith("```python\n") and reply.rstrip().endswith("```"), reply
    return reply[len("```python\n") : reply.rstrip().rindex("```")]


def test_known_good_replies_with_the_solution_in_a_python_block(problems_root):
    policy = KnownGoodPolicy(problems_root)
    reply = policy.act(obs("kernelbench/level1/23"))
    assert code_block(reply) == GOOD_SOFTMAX  # a_first.py: the first file by name
    assert "class ModelNew" in code_block(reply)
    assert code_block(policy.act(obs("dlrm/1"))) == "class ModelNew: pass  # dlrm\n"
    assert code_block(policy.act(obs("kernelbench/level1/5"))) == "class ModelNew: pass  # five\n"


def test_known_good_accepts_a_string_root(problems_root):
    assert "softmax" in KnownGoodPolicy(str(problems_root)).act(obs("kernelbench/level1/23"))


def test_known_good_lists_the_problems_it_covers(problems_root):
    assert KnownGoodPolicy(problems_root).problems() == ["kernelbench/level1/5", "kernelbench/level1/23", "dlrm/1"]


@pytest.mark.parametrize("problem_id", ["kernelbench/level1/40", "dlrm/2", "dlrm/9", "kernelbench/level2/23", "x/1"])
def test_known_good_raises_without_a_solution(problems_root, problem_id):
    with pytest.raises(MissingSolutionError, match=problem_id.replace("/", ".")):
        KnownGoodPolicy(problems_root).act(obs(problem_id))


def test_known_bad_cycles_through_the_wrong_candidates(problems_root):
    policy = KnownBadPolicy(solutions_root=problems_root)
    replies = [code_block(policy.act(obs("kernelbench/level1/23"))) for _ in range(3)]
    # side_stream.py, zeros.py, then side_stream.py again (file-name order)
    assert [r.splitlines()[0] for r in replies] == [
        "# expect: timing_escape",
        "# expect: inaccurate|invariant",
        "# expect: timing_escape",
    ]
    assert "unwritten" in policy.act(obs("kernelbench/level1/40"))  # each problem has its own cycle
    policy.reset()
    assert "timing_escape" in policy.act(obs("kernelbench/level1/23"))


def test_known_bad_by_name(problems_root):
    policy = KnownBadPolicy("zeros", solutions_root=problems_root)
    assert all("inaccurate|invariant" in policy.act(obs("kernelbench/level1/23")) for _ in range(2))
    with pytest.raises(MissingSolutionError, match="side_stream, zeros"):
        KnownBadPolicy("nope", solutions_root=problems_root).act(obs("kernelbench/level1/23"))
    with pytest.raises(MissingSolutionError):
        KnownBadPolicy(solutions_root=problems_root).act(obs("kernelbench/level1/5"))


def test_known_bad_lists_its_problems(problems_root):
    assert KnownBadPolicy(solutions_root=problems_root).problems() == [
        "kernelbench/level1/23",
        "kernelbench/level1/40",
        "dlrm/1",
    ]


def test_known_bad_suite_parses_expectations(problems_root):
    suite = known_bad_suite(problems_root)
    assert [case.id for case in suite] == [
        "kernelbench/level1/23:side_stream",
        "kernelbench/level1/23:zeros",
        "kernelbench/level1/40:partial",
        "dlrm/1:net",
    ]
    side_stream, zeros, partial, net = suite
    assert side_stream.expect == ("timing_escape",)
    assert side_stream.expect_cpu == ("pass",) and side_stream.expect_cuda is None
    assert side_stream.gpu_only is True
    assert side_stream.expected_on("cpu") == ("pass",) and side_stream.expected_on("cuda") == ("timing_escape",)
    assert zeros.expect == ("inaccurate", "invariant") and zeros.gpu_only is False
    assert zeros.expect_cpu is zeros.expect_cuda is zeros.expect_sandbox is None
    assert partial.problem_id == "kernelbench/level1/40" and partial.name == "partial"
    assert partial.source == "# expect: unwritten\nclass ModelNew: pass\n"
    assert net.expect == ("sandbox_violation", "runtime")
    assert net.expect_sandbox == ("sandbox_violation",) and net.expect_cuda == ("crash",)
    assert net.path.endswith("net.py")
    problem_id, name, source, expect, *_ = net  # a plain tuple too
    assert (problem_id, name, expect) == ("dlrm/1", "net", ("sandbox_violation", "runtime"))


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("class ModelNew: pass\n", "expect: a|b"),
        ("# expect: inaccurate\n# expect: unwritten\n", "given twice"),
        ("# expect: inaccurate\n# expect-gpu: unwritten\n", "unknown directive"),
        ("# expect: inaccurate\n# expect_cpu: unwritten\n", "unknown directive"),
        ("# expect: inaccurate||unwritten\n", "categories"),
        ("# expect: writes zeros\n", "categories"),
        ("# expect:\n", "categories"),
        ("# expect: inaccurate\n# precision: fp16\n", "precision"),
        ("# expect: inaccurate\n# precision: bf16\n# precision: fp32\n", "precision"),
    ],
)
def test_parse_expectations_rejects_mislabelled_candidates(source, message):
    with pytest.raises(ValueError, match=message):
        parse_expectations(source, where="wrong/x.py")


def test_parse_expectations_reads_only_column_zero_comments():
    source = "# EXPECT: nonfinite | inaccurate\nx = 1\n    # expect-cpu: pass\n# gpu-only: needs streams\n"
    parsed = parse_expectations(source)
    assert parsed["expect"] == ("nonfinite", "inaccurate")
    assert parsed["expect_cpu"] is None
    assert parsed["gpu_only"] is True
    assert parse_expectations("# expect: crash\n# gpu-only-ish\n")["gpu_only"] is False


def test_a_wrong_candidate_may_name_the_precision_it_is_judged_at():
    """``# precision: bf16`` travels to the suite's request; without it the problem's default (None)."""
    assert parse_expectations("# expect: inaccurate\n# Precision: BF16\n")["precision"] == "bf16"
    assert parse_expectations("# expect: inaccurate\n")["precision"] is None
    fp8 = next(c for c in known_bad_suite() if c.id == "kernelbench/level1/1:fp8_dot")
    assert fp8.precision == "bf16"


def test_known_bad_suite_stops_on_a_mislabelled_file(problems_root):
    write(problems_root, "kernelbench/solutions/40/wrong/unlabelled.py", "class ModelNew: pass\n")
    with pytest.raises(ValueError, match="unlabelled.py"):
        known_bad_suite(problems_root)


def test_default_root_is_the_installed_problems_package():
    expected = Path(str(importlib.resources.files("kbenv.problems")))
    assert Path(str(KnownGoodPolicy().root)) == expected
    assert (expected / "__init__.py").is_file()


def test_installed_wrong_candidates_are_labelled():
    # Every shipped wrong/ file must parse: a label error here is a data bug in problems/.
    for case in known_bad_suite():
        assert case.expect, case.id


def test_echo_policy_replies_and_records():
    policy = EchoPolicy("```python\nclass ModelNew: pass\n```")
    observations = [obs("dlrm/1", turn=0), obs("dlrm/1", turn=1)]
    assert policy.act_batch(observations) == ["```python\nclass ModelNew: pass\n```"] * 2
    assert policy.observations == observations

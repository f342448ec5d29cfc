import math

import pytest

from kbenv.project import project
from kbenv.rewards import amdahl as A
from kbenv.rewards import profiler
from kbenv.rewards.amdahl import default_profile_name, share_for
from kbenv.rewards.reward import Reward, amdahl, compute_reward, end_to_end_gain, fast_p, speedup, speedup_reward
from kbenv.sandbox.result import EvalResult


def test_eq1_end_to_end_gain():
    assert end_to_end_gain(0.03, 1.235) == pytest.approx(1 / (0.97 + 0.03 / 1.235))
    assert end_to_end_gain(0.4, 1.235) == pytest.approx(1.0824, abs=1e-4)  # the paper: "yields 9%"
    assert end_to_end_gain(0.5, 1.0) == 1.0
    with pytest.raises(ValueError):
        end_to_end_gain(1.5, 2.0)


def test_reward_functions_are_gated():
    for name in ("amdahl", "speedup", "fast_p"):
        r, comps = compute_reward(name, False, 3.0, 0.5)
        assert r == 0.0 and comps["gate"] == 0.0
    assert compute_reward("speedup", True, 2.0)[0] == pytest.approx(math.log(2))
    assert compute_reward("fast_p", True, 1.6, p=1.5)[0] == 1.0
    assert compute_reward("fast_p", True, 1.4, p=1.5)[0] == 0.0
    # amdahl: any verified kernel outranks any failure, speed moves it within (0, 1/(1-s)].
    slow = compute_reward("amdahl", True, 0.01, 0.5)[0]
    assert 0 < slow < 1
    assert compute_reward("amdahl", True, 1e9, 0.5)[0] == pytest.approx(2.0, rel=1e-6)
    with pytest.raises(ValueError):
        compute_reward("nope", True, 1.0)


BAD_SIGMAS = [None, math.nan, math.inf, -math.inf, 0.0, -2.0]


@pytest.mark.parametrize("sigma", BAD_SIGMAS)
@pytest.mark.parametrize("fn", [amdahl, speedup_reward, fast_p])
def test_a_verified_kernel_with_a_bad_speedup_is_rejected_with_zero_and_a_reason(fn, sigma):
    r = fn(gate=True, sigma=sigma, share=0.3, p=1.0)
    assert isinstance(r, Reward)
    assert r.value == 0.0 and r.rejected and r.components["rejected"] == r.rejected
    # the same function pays a good sigma (the rejection is about the input, not the function)
    good = fn(gate=True, sigma=2.0, share=0.3, p=1.0)
    assert good.rejected is None and good.value > 0


@pytest.mark.parametrize("share", [math.nan, math.inf, -0.1, 1.5, None])
def test_amdahl_rejects_a_share_outside_the_unit_interval(share):
    r = amdahl(True, 2.0, share)
    assert r.value == 0.0 and r.rejected and "share" in r.rejected
    assert amdahl(True, 2.0, 0.5).rejected is None


def test_fast_p_rejects_a_non_finite_threshold():
    assert fast_p(True, 2.0, p=math.nan).rejected
    assert fast_p(True, 2.0, p=1.5).value == 1.0


def test_amdahl_never_overflows_to_a_non_finite_reward():
    r = amdahl(True, 5e-324, 1.0)  # s / sigma overflows
    assert math.isfinite(r.value)


@pytest.mark.parametrize("base,cand", [(1.0, 0.0), (1.0, -1.0), (1.0, math.nan), (1.0, math.inf),
                                       (math.inf, 1.0), (math.nan, 1.0), (0.0, 1.0), (-1.0, 1.0)])
def test_speedup_of_bad_times_is_nan_and_never_reaches_a_reward(base, cand):
    s = speedup(base, cand)
    assert math.isnan(s)
    for name in ("amdahl", "speedup", "fast_p"):
        r = compute_reward(name, True, s, 0.3)
        assert r.value == 0.0 and r.rejected
    assert speedup(2.0, 1.0) == 2.0


def test_a_passing_result_with_a_non_finite_speedup_gets_zero_not_an_exception():
    r = EvalResult(problem="p", family="softmax", device="cuda", gpu=None, size="full", precision="fp32",
                   candidate_sha256="x", verdict="pass", speedup=math.inf, speedup_meaningful=True)
    r.finalize_reward("amdahl", 0.3, 1.0)
    assert r.reward == 0.0 and r.reward_components["rejected"]


def test_reward_of_a_known_good_kernel_moves_with_the_profile():
    """The same verified kernel (sigma = 2) under two workload profiles gets Eq. 1's gain for each share."""
    sigma = 2.0
    s_resnet, status, _ = share_for("h200-resnet50-train", "normalization")
    s_gpt, _, _ = share_for("h200-gpt-infer", "normalization")
    assert status == "measured" and s_resnet > s_gpt > 0
    r1 = compute_reward("amdahl", True, sigma, s_resnet)[0]
    r2 = compute_reward("amdahl", True, sigma, s_gpt)[0]
    assert r1 == pytest.approx(1 / ((1 - s_resnet) + s_resnet / sigma))
    assert r2 == pytest.approx(1 / ((1 - s_gpt) + s_gpt / sigma))
    assert r1 > r2 > 1.0


def test_a_family_a_paper_row_does_not_split_gets_zero_never_the_bucket():
    """The old fallback credited every non-GEMM KernelBench problem with the whole addressable fraction
    (0.161 under paper-a100-qwen14b-train) and every GEMM with the already-optimal bucket (0.644)."""
    for fam in ("softmax", "matmul", "elementwise"):
        s, status, name = share_for("paper-a100-qwen14b-train", fam)
        assert (s, status, name) == (0.0, "absent", "paper-a100-qwen14b-train")
    s, status, _ = share_for("paper-a100-dlrm-train", "embedding", "dlrm")
    assert (s, status) == (0.495, "group")


def test_the_default_weight_is_a_measured_h200_share_of_a_workload_where_the_family_runs():
    assert default_profile_name("dlrm", "embedding") == "h200-dlrm-train"
    assert default_profile_name("dlrm", "normalization") == "h200-dlrm-train"  # the set's own workload
    assert default_profile_name("kernelbench", "conv") == "h200-resnet50-train"
    assert default_profile_name("kernelbench", "attention") == "h200-gpt-train"
    for fam in ("matmul", "conv", "normalization", "loss", "softmax"):
        s, status, name = share_for(None, fam, "kernelbench")
        assert name.startswith("h200-") and status == "measured"
        # the largest share among the measured training workloads
        assert s == max(A.family_share_info(A.load_profile(n), fam).share for n in A.DEFAULT_CANDIDATES)
    s, _, _ = share_for(None, "softmax", "kernelbench")
    assert s == 0.0  # softmax is fused into attention in every measured workload


def test_the_profiler_and_the_reward_path_share_one_definition():
    assert profiler.family_share_info is A.family_share_info
    assert profiler.load_profile is A.load_profile
    for name in A.list_profiles():
        prof = A.load_profile(name)
        for fam in ("normalization", "embedding", "softmax"):
            assert profiler.family_share(prof, fam) == share_for(prof, fam).share


def test_share_table_prints_every_family_and_the_reward_at_four_speedups(capsys):
    from kbenv.rewards import share_table

    share_table.main([])
    out = capsys.readouterr().out
    assert "| kernelbench | normalization | h200-resnet50-train | 0.5618 | 0.640 | 1.000 | 1.391 | 1.728 |" in out
    assert out.count("| dlrm |") == len(share_table.SET_FAMILIES["dlrm"])


def test_cpu_results_earn_no_speed_credit():
    r = EvalResult(problem="p", family="softmax", device="cpu", gpu=None, size="small", precision="fp32",
                   candidate_sha256="x", verdict="pass", speedup=0.001, speedup_meaningful=False)
    r.finalize_reward("amdahl", 0.3, 1.0)
    assert r.reward == 1.0 and r.reward_components["speedup_measured"] == 0.001
    r.finalize_reward("speedup", 0.3, 1.0)
    assert r.reward == 0.0


def test_projection_reproduces_the_paper():
    # Table 3: DLRM inference, 58.2% addressable, DLRM-Bench 41.7% wins at a 1.552x median -> 8.63% realistic.
    assert project(0.582, 0.417, 1.552)["time_saved"] == pytest.approx(0.0863, abs=5e-5)
    assert project(0.419, 0.417, 1.552)["time_saved"] == pytest.approx(0.0621, abs=5e-5)
    assert project(0.089, 0.417, 1.552)["time_saved"] == pytest.approx(0.0132, abs=5e-5)


def test_the_readme_carries_the_current_share_table(capsys):
    """The README's table of s and reward per family is what `python -m kbenv.rewards.share_table` prints now."""
    from pathlib import Path

    from kbenv.rewards import share_table

    share_table.main([])
    printed = capsys.readouterr().out.strip()
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "python -m kbenv.rewards.share_table" in readme
    assert printed in readme, "README's share table is stale: paste the output of python -m kbenv.rewards.share_table"

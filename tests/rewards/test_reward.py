import math

import pytest

from kbenv.project import project
from kbenv.rewards.amdahl import share_for
from kbenv.rewards.reward import compute_reward, end_to_end_gain
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

import json
import math

import pytest
import torch
from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEvent

from kbenv.problems.workloads import MODES, WORKLOADS
from kbenv.rewards.classify import BUCKETS, FAMILIES
from kbenv.rewards.profiler import (
    PROFILES_DIR,
    UNCLASSIFIED_BUDGET,
    ProfileError,
    check_profile,
    device_slug,
    family_share,
    family_share_info,
    list_profiles,
    load_profile,
    profile_from_records,
    profile_workload,
    reclassify,
    records_from_events,
    save_profile,
)

GEMM = "nvjet_sm90_tst_64x64_64x13_2x1_v_bz_bias_TNT"
EMB = "void at::native::(anonymous namespace)::EmbeddingBag_updateOutputKernel_sum_mean<float, long>(long const*)"
COPY = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)>(int)"

# Table 3 of the paper: (already optimal, addressable)
TABLE3 = {
    "paper-a100-llama70b-infer": (0.859, 0.089),
    "paper-a100-qwen14b-train": (0.644, 0.161),
    "paper-a100-qwen14b-infer": (0.798, 0.168),
    "paper-a100-dlrm-train": (0.325, 0.419),
    "paper-a100-resnet50-infer": (0.368, 0.461),
    "paper-a100-resnet50-train": (0.290, 0.553),
    "paper-a100-dlrm-infer": (0.374, 0.582),
}


# --------------------------------------------------------------------------------------------------------------
# profile_from_records: shares, the unclassified budget, save / load
# --------------------------------------------------------------------------------------------------------------


def _records(unclassified_us: float):
    return [
        (GEMM, "aten::linear", 600.0),
        (EMB, "aten::embedding_bag", 300.0),
        (COPY, "aten::embedding_bag", 100.0 - unclassified_us),
        ("mystery_kernel_v2", None, unclassified_us),
    ]


def test_shares_from_records():
    prof = profile_from_records(_records(0.0) + [(EMB, "aten::embedding_bag", 0.0)], steps=2, name="t")
    assert prof["total_ms"] == pytest.approx(0.5)  # 1000 us over 2 steps
    assert prof["buckets"] == {"already_optimal": 0.6, "addressable": 0.3, "overhead": 0.1, "unclassified": 0.0}
    assert prof["addressable_fraction"] == 0.3
    assert prof["families"] == {"matmul": 0.6, "embedding": 0.4}  # the copy is launched by the embedding op
    assert prof["bucket_families"]["overhead"] == {"embedding": 0.1}
    assert prof["top_kernels"][0] == [GEMM, "already_optimal", "matmul", 0.6]
    assert set(prof["buckets"]) == set(BUCKETS)
    assert math.isclose(sum(prof["buckets"].values()), 1.0)
    assert math.isclose(sum(prof["families"].values()), 1.0)


def test_unclassified_over_budget_raises():
    with pytest.raises(ProfileError, match="mystery_kernel_v2"):
        profile_from_records(_records(10.0), name="t")  # 1% unclassified
    prof = profile_from_records(_records(4.0), name="t")  # 0.4% is within the 0.5% budget
    assert prof["unclassified_fraction"] == pytest.approx(0.004)
    assert UNCLASSIFIED_BUDGET == 0.005


def test_unclassified_over_budget_can_be_written_with_a_warning(tmp_path):
    with pytest.warns(UserWarning, match="unclassified"):
        prof = profile_from_records(_records(10.0), name="t", allow_unclassified=True)
    assert prof["unclassified_fraction"] == pytest.approx(0.01)
    assert prof["warnings"]
    path = save_profile(prof, tmp_path / "t.json")
    assert load_profile(path)["unclassified_fraction"] == pytest.approx(0.01)
    del prof["warnings"]
    with pytest.raises(ProfileError):
        save_profile(prof, tmp_path / "u.json")
    with pytest.raises(ProfileError):
        check_profile(prof)


def test_empty_records_raise():
    with pytest.raises(ProfileError):
        profile_from_records([], name="t")


def test_save_load_and_reclassify_roundtrip(tmp_path):
    prof = profile_from_records(_records(2.0), steps=4, name="roundtrip", meta={"workload": "x"})
    path = save_profile(prof, tmp_path / "roundtrip.json")
    loaded = load_profile(str(path))
    assert loaded == json.loads(json.dumps(prof))
    again = reclassify(loaded)
    for key in ("buckets", "families", "addressable_fraction", "top_kernels", "steps", "launches_per_step"):
        assert again[key] == loaded[key], key
    assert again["workload"] == "x"


def test_load_profile_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_profile("no-such-profile")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ProfileError):
        load_profile(bad)


def test_device_slug():
    assert device_slug("NVIDIA H200") == "h200"
    assert device_slug("NVIDIA A100-SXM4-80GB") == "a100"
    assert device_slug("NVIDIA GeForce RTX 4090") == "rtx"


# --------------------------------------------------------------------------------------------------------------
# The paper's Table 3 rows and family_share
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(TABLE3))
def test_paper_profiles_match_table3(name):
    prof = load_profile(name)
    already, addressable = TABLE3[name]
    assert prof["source"] == "paper Table 3"
    assert prof["addressable_fraction"] == addressable
    assert prof["buckets"]["addressable"] == addressable
    assert prof["buckets"]["already_optimal"] == already
    assert math.isclose(sum(prof["buckets"].values()), 1.0, abs_tol=1e-9)
    assert prof["families_complete"] is False
    assert prof["notes"]
    for key, share in prof["families"].items():
        assert all(part in FAMILIES for part in key.split("+")) or key == "addressable_other"
        assert 0.0 <= share <= 1.0


def test_all_paper_rows_are_shipped():
    assert set(TABLE3) <= set(list_profiles())
    assert all((PROFILES_DIR / f"{n}.json").is_file() for n in TABLE3)


def test_family_share_from_paper_rows():
    assert family_share(load_profile("paper-a100-resnet50-train"), "normalization") == 0.445
    assert family_share(load_profile("paper-a100-dlrm-infer"), "embedding") == 0.374
    assert family_share(load_profile("paper-a100-qwen14b-train"), "optimizer") == 0.182
    train = load_profile("paper-a100-dlrm-train")
    for fam in ("embedding", "gather_scatter"):
        info = family_share_info(train, fam)
        assert (info.share, info.status, info.key) == (0.495, "group", "embedding+gather_scatter")
        with pytest.raises(ProfileError):
            family_share(train, fam, strict=True)
    # no split stated: 0.0, flagged absent -- never the whole addressable fraction
    info = family_share_info(load_profile("paper-a100-resnet50-train"), "elementwise")
    assert (info.share, info.status) == (0.0, "absent")
    with pytest.raises(ProfileError):
        family_share(load_profile("paper-a100-resnet50-train"), "elementwise", strict=True)
    with pytest.raises(ValueError):
        family_share(train, "not_a_family")


def test_family_share_from_measured_profile():
    prof = profile_from_records(_records(0.0), name="t")
    assert family_share(prof, "embedding") == pytest.approx(0.4)
    info = family_share_info(prof, "softmax")  # measured, and the workload spends no time there
    assert (info.share, info.status) == (0.0, "measured")
    assert family_share(prof, "softmax", strict=True) == 0.0


def test_shipped_measured_profiles_are_consistent_with_the_classifier():
    """A measured profile stores its kernels: reclassifying them must still pass the budget and agree with the
    stored shares (a classifier change that would move a shipped profile fails here)."""
    for name in list_profiles():
        prof = load_profile(name)
        if prof.get("source") != "measured":
            continue
        check_profile(prof)
        again = reclassify(prof)
        for bucket in BUCKETS:
            # stored per-kernel times are rounded to 1 ns: shares agree to ~1e-5
            assert again["buckets"][bucket] == pytest.approx(prof["buckets"][bucket], abs=1e-4), (name, bucket)
        assert prof["device"] == "cuda" and prof["total_gpu_ms"] > 0


# --------------------------------------------------------------------------------------------------------------
# Attribution of device events to their launching op (synthetic events in the shape torch.profiler produces)
# --------------------------------------------------------------------------------------------------------------


def _evt(id, name, start, end, *, thread=1, device=DeviceType.CPU, parent=None, seq=-1, scope=0, fwd_thread=0,
         linked=0, kind=None):  # fmt: skip
    e = FunctionEvent(id=id, name=name, thread=thread, start_us=start, end_us=end, device_type=device)
    e.sequence_nr, e.scope, e.fwd_thread, e.linked_correlation_id, e.activity_type = seq, scope, fwd_thread, linked, kind
    if parent is not None:
        parent.append_cpu_child(e)
        e.set_cpu_parent(parent)
    return e


def test_records_from_cuda_events():
    step = _evt(1, "ProfilerStep#1", 0, 1000, scope=7)
    _evt(12, "aten::add_", 2, 5, parent=step, seq=7)  # creates no node, so it records the next op's number too
    emb = _evt(2, "aten::embedding_bag", 10, 100, parent=step, seq=7)
    inner = _evt(3, "aten::_embedding_bag", 11, 99, parent=emb, seq=7)
    label = _evt(4, "kbenv::interaction", 100, 200, parent=step, scope=7)
    bmm = _evt(5, "aten::bmm", 110, 190, parent=label, seq=8)
    # backward on the autograd engine's thread (2), pointing back to forward sequence numbers on thread 1
    wrap = _evt(6, "autograd::engine::evaluate_function: BmmBackward0", 300, 400, thread=2, seq=8, fwd_thread=1)
    node = _evt(7, "BmmBackward0", 301, 399, thread=2, parent=wrap, seq=8, scope=1, fwd_thread=1)
    bwd_mm = _evt(8, "aten::bmm", 310, 390, thread=2, parent=node)
    wrap2 = _evt(9, "autograd::engine::evaluate_function: EmbeddingBagBackward0", 400, 500, thread=2, seq=7,
                 fwd_thread=1)  # fmt: skip
    node2 = _evt(10, "EmbeddingBagBackward0", 401, 499, thread=2, parent=wrap2, seq=7, scope=1, fwd_thread=1)
    bwd_emb = _evt(11, "aten::_embedding_bag_backward", 410, 490, thread=2, parent=node2)
    grad = "void at::native::compute_grad_weight_bags<float>(long const*)"
    # torch attaches each device event to the op whose correlation id it carries
    inner.append_kernel(EMB, 0, 30.0)
    bmm.append_kernel(GEMM, 0, 10.0)
    bwd_mm.append_kernel(GEMM, 0, 20.0)
    bwd_emb.append_kernel(grad, 0, 40.0)
    step.append_kernel("ProfilerStep*", 0, 1000.0)  # an annotation copy is never a kernel
    cpu = [step, *step.cpu_children[:1], emb, inner, label, bmm, wrap, node, bwd_mm, wrap2, node2, bwd_emb]
    dev = DeviceType.CUDA
    device_events = [
        _evt(500, EMB, 1000, 1030, device=dev),
        _evt(501, GEMM, 1030, 1040, device=dev),
        _evt(502, GEMM, 1040, 1060, device=dev),
        _evt(503, grad, 1060, 1100, device=dev),
        _evt(504, "Memset (Device)", 1100, 1101, device=dev),  # launched outside every op
        _evt(505, "ProfilerStep*", 1000, 1101, device=dev),
        _evt(506, "kbenv::interaction", 1030, 1040, device=dev, kind="gpu_user_annotation"),
    ]
    records, stats = records_from_events(cpu + device_events, "cuda")
    assert sorted(records, key=repr) == sorted(
        [
            (EMB, "aten::embedding_bag", 30.0),
            (GEMM, "kbenv::interaction", 10.0),
            (GEMM, "kbenv::interaction", 20.0),  # the backward inherits the forward op's region
            (grad, "aten::embedding_bag", 40.0),
            ("Memset (Device)", None, 1.0),
        ],
        key=repr,
    )
    assert stats["skipped_device_events"] == {"annotation": 1, "gpu_user_annotation": 1}
    assert stats["unattributed_fraction"] == pytest.approx(1 / 101, abs=1e-6)
    prof = profile_from_records(records, name="synthetic")
    assert prof["families"]["interaction"] == pytest.approx(30 / 101, abs=1e-6)
    assert prof["bucket_families"]["already_optimal"] == {"interaction": pytest.approx(30 / 101, abs=1e-6)}


# --------------------------------------------------------------------------------------------------------------
# Workloads and real (CPU) profiles
# --------------------------------------------------------------------------------------------------------------


def test_workload_registry():
    assert set(WORKLOADS) == {"dlrm", "resnet50", "gpt"}
    with pytest.raises(ValueError):
        WORKLOADS["gpt"]("decode", "cpu", torch.float32, size="tiny")
    with pytest.raises(ValueError):
        WORKLOADS["gpt"]("train", "cpu", torch.float32, size="huge")


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
@pytest.mark.parametrize("mode", MODES)
def test_tiny_cpu_profile(workload, mode):
    prof = profile_workload(workload, mode, device="cpu", warmup=1, steps=2, size="tiny")
    assert prof["device"] == "cpu" and prof["total_gpu_ms"] is None
    assert "NOT a GPU profile" in prof["time_basis"]
    assert prof["name"] == f"cpu-{workload}-{mode}-tiny"
    assert prof["workload"] == workload and prof["mode"] == mode
    assert prof["total_ms"] > 0
    assert math.isclose(sum(prof["buckets"].values()), 1.0, abs_tol=1e-5)
    assert prof["unclassified_fraction"] <= UNCLASSIFIED_BUDGET
    assert set(prof["families"]) <= set(FAMILIES)
    assert len(prof["top_kernels"]) <= 30
    assert all(len(row) == 4 for row in prof["top_kernels"])
    fams = prof["families"]
    if workload == "dlrm":
        assert fams["embedding"] > 0 and fams["interaction"] > 0
    if workload == "resnet50":
        assert fams["conv"] > 0 and fams["normalization"] > 0
    if workload == "gpt":
        assert fams["attention"] > 0 and fams["matmul"] > 0
    if mode == "train":
        assert fams["optimizer"] > 0
    json.dumps(prof)  # serialisable


def test_tiny_dlrm_backward_is_attributed_to_forward_ops():
    prof = profile_workload("dlrm", "train", device="cpu", warmup=1, steps=1, size="tiny")
    contexts = {(row[0], row[1]) for row in prof["kernels"]}
    assert ("aten::_embedding_bag_backward", "aten::embedding_bag") in contexts
    assert any(name == "aten::bmm" and ctx == "kbenv::interaction" for name, ctx in contexts)
    assert any(name.startswith("aten::_index_put_impl") and ctx == "kbenv::interaction" for name, ctx in contexts)


# --------------------------------------------------------------------------------------------------------------
# GPU
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
@pytest.mark.parametrize("mode", MODES)
def test_tiny_cuda_profile(workload, mode):
    prof = profile_workload(workload, mode, device="cuda", warmup=2, steps=2, size="tiny")
    assert prof["device"] == "cuda" and prof["total_gpu_ms"] > 0
    assert prof["unclassified_fraction"] <= UNCLASSIFIED_BUDGET
    assert prof["attribution"]["unattributed_fraction"] <= 0.01
    assert prof["attribution"]["overattributed_fraction"] == 0.0
    fams = prof["families"]
    if workload == "dlrm":
        assert fams["embedding"] > 0 and fams["interaction"] > 0
    if workload == "resnet50":
        assert fams["conv"] > 0 and fams["normalization"] > 0
    if workload == "gpt":
        assert fams["attention"] > 0 and fams["matmul"] > 0

"""The checker over the whole registry (as Gymnasium's test_envs runs check_env over every env): every problem's
reference runs at the CPU size, is finite, deterministic under a seed and depends on its inputs, and its
verifier rejects zeros, a constant, a partial write and the identity."""

import json
import subprocess
import sys

import pytest
import torch

from kbenv.problems import (ProblemError, get_problem, list_problems, load_namespace, make_inputs, make_model,
                            problem_seed, register_kernelbench_dir)
from kbenv.rewards.verdict import Trial, judge

ALL = list_problems()


def test_ids():
    ids = [p.id for p in ALL]
    assert len(ids) == 112
    assert sorted(ids) == sorted([f"kernelbench/level1/{n}" for n in range(1, 101)] + [f"dlrm/{n}" for n in range(1, 13)])
    assert {p.id for p in list_problems("dlrm")} == {f"dlrm/{n}" for n in range(1, 13)}
    names = [p.name for p in list_problems("dlrm")]
    assert names[:3] == ["1_EmbeddingBagSum", "2_EmbeddingBagMean", "3_Gather"]
    assert get_problem("kernelbench/level1/23").name == "23_Softmax"


def test_manifest_is_current():
    r = subprocess.run([sys.executable, "-m", "kbenv.problems.build_manifest", "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def _run(p, seed, domain="default"):
    ns = p.namespace("small")
    model = make_model(ns, "Model", 42, "cpu", torch.float32)
    inputs = make_inputs(ns, seed, domain, "cpu", torch.float32, p.broad_inputs)
    with torch.no_grad():
        out = model(*inputs)
    return inputs, (list(out) if isinstance(out, (tuple, list)) else [out])


def _trial(inputs, refs, outs, domain="default"):
    metas = [{"type": "torch.Tensor"} for _ in outs]
    return Trial(domain, inputs, refs, outs, None, metas, 0xFE, 0x7F)


@pytest.mark.parametrize("p", ALL, ids=[p.id for p in ALL])
def test_problem(p):
    seed = problem_seed(p.id)
    inputs, refs = _run(p, seed)
    _, again = _run(p, seed)
    _, other = _run(p, seed + 1)
    for r, a, o in zip(refs, again, other):
        if r.is_floating_point():
            assert torch.isfinite(r).all(), "reference output is not finite"
        assert torch.equal(r, a), "reference is not deterministic under a seed"
    assert any(not torch.equal(r, o) for r, o in zip(refs, other)), "output does not depend on the inputs"
    for d in p.domains:
        _, rd = _run(p, seed, d)
        assert all(torch.isfinite(x).all() for x in rd if x.is_floating_point()), f"non-finite on domain {d}"
    # Known-bad outputs the verifier must reject: zeros, a constant, a partial write, the identity.
    bad = {
        "zeros": [torch.zeros_like(r) for r in refs],
        "constant": [_constant(r) for r in refs],
        "partial": [_partial(r) for r in refs],
    }
    x0 = inputs[0]
    if isinstance(x0, torch.Tensor) and x0.shape == refs[0].shape and x0.dtype == refs[0].dtype:
        bad["identity"] = [x0.clone()] + refs[1:]
    for name, outs in bad.items():
        v = judge([_trial(inputs, refs, outs)], "fp32", p.invariants, p.tolerance)
        # The identity is legitimately right for ReLU-like ops on the official [0, 1) inputs; their broader
        # domains (manifest) must reject it.
        if not v.correct:
            continue
        assert name == "identity", f"{name} output accepted: {v.reason}"
        broad = [d for d in p.domains if d != "default"]
        assert broad, "identity passes and the manifest lists no broader domain to catch it"
        bi, br = _run(p, seed, broad[0])
        vb = judge([_trial(bi, br, [bi[0].clone()] + br[1:], broad[0])], "fp32", p.invariants, p.tolerance)
        assert not vb.correct, "identity accepted on the broader domain too"
    # And the reference itself passes its own verifier (an honest kernel is never rejected).
    v = judge([_trial(inputs, refs, [r.clone() for r in refs])], "fp32", p.invariants, p.tolerance)
    assert v.correct, v.reason


def _constant(r):
    if not r.is_floating_point():
        return torch.zeros_like(r)
    value = float(r.double().mean()) if r.numel() > 1 else float(r.double().reshape(-1)[0]) * 1.5 + 1.0
    return torch.full_like(r, value)


def _partial(r):
    out = torch.zeros_like(r)
    flat, src = out.reshape(-1), r.reshape(-1)
    n = max(1, flat.numel() // 2)
    flat[:n] = src[:n]
    if flat.numel() == 1 and r.is_floating_point():
        flat[0] = src[0] * 0.5
    return out


def test_external_kernelbench_dir(tmp_path):
    lvl = tmp_path / "KernelBench" / "level1"
    lvl.mkdir(parents=True)
    src = get_problem("kernelbench/level1/19").source
    (lvl / "19_ReLU.py").write_text(src)
    found = register_kernelbench_dir(tmp_path, levels=(1,))
    assert [p.id for p in found] == ["kernelbench-ext/level1/19"]
    assert get_problem("kernelbench-ext/level1/19").source == src  # file unchanged
    (lvl / "20_Bad.py").write_text("import torch\ndef get_inputs():\n    return []\n")
    with pytest.raises(ProblemError, match=r"20_Bad\.py.*missing Model, get_init_inputs"):
        register_kernelbench_dir(tmp_path, levels=(1,))


def test_malformed_source_names_file():
    with pytest.raises(ProblemError, match="x.py: syntax error"):
        load_namespace("def (", "x.py")


def test_cli_problems_list_json():
    r = subprocess.run([sys.executable, "-m", "kbenv.cli", "problems", "list", "--json"], capture_output=True,
                       text=True, check=True)
    rows = json.loads(r.stdout)
    assert len(rows) == 112
    assert {r["id"] for r in rows} == {p.id for p in ALL}

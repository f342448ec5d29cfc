"""The structured input domains: drawn from the seed, valid for the op, and structured at any size."""

import pytest
import torch

from kbenv.problems import (DOMAINS, STRUCTURED_DOMAINS, ProblemError, get_problem, list_problems, make_inputs,
                            sparsify, structure)
from kbenv.problems import _entry_to_problem


def _draw(pid, domain, seed, dtype=torch.float32):
    p = get_problem(pid)
    return make_inputs(p.namespace("small"), seed, domain, "cpu", dtype, p.broad_inputs)


@pytest.mark.parametrize("domain", STRUCTURED_DOMAINS)
def test_structure_comes_from_the_seed_and_only_from_it(domain):
    pid = "kernelbench/level1/98" if domain == "simplex" else "kernelbench/level1/47"
    a, b, c = _draw(pid, domain, 7), _draw(pid, domain, 7), _draw(pid, domain, 8)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])
    # where the mass sits moves with the seed: the heaviest index of axis 1 differs between seeds
    heavy = [int(x[0].abs().sum(dim=(0, 2) if x[0].dim() == 3 else 0).argmax()) for x in (a, c)]
    assert heavy[0] != heavy[1] or domain == "offset"


def test_structured_keeps_signs_and_shapes_and_stays_finite():
    base = _draw("kernelbench/level1/47", "default", 3)[0]
    x = _draw("kernelbench/level1/47", "structured", 3)[0]
    assert x.shape == base.shape and x.dtype == base.dtype and torch.isfinite(x).all()
    assert (x >= 0).all()  # U[0, 1) draws stay non-negative (the domain multiplies by positive factors)
    assert float(x.abs().max() / base.abs().max()) > 100  # and it is no longer i.i.d.: decades apart
    xb = _draw("kernelbench/level1/47", "structured", 3, torch.bfloat16)[0]
    assert xb.dtype == torch.bfloat16 and torch.equal(xb, x.bfloat16())  # the same values at every precision


def test_a_few_indices_carry_a_large_share_of_each_axis_at_any_size():
    g = torch.Generator().manual_seed(0)
    for n in (256, 65536):
        x = structure(torch.ones(4, n), g)
        col_mass = x.sum(0)
        top = col_mass.topk(16).values.sum() / col_mass.sum()
        assert top > 0.5, (n, float(top))  # 16 columns of n carry most of the mass, large n as small
        spikes = (x / x.median(dim=1, keepdim=True).values > 50).sum(1)
        assert (spikes >= 1).all()  # every long fiber has its spikes


def test_sparse_domain_puts_most_of_the_mass_on_a_few_dozen_elements():
    g = torch.Generator().manual_seed(1)
    x = sparsify(torch.rand(64, 1024, generator=g), g)
    flat = x.flatten()
    assert flat.topk(32).values.sum() / flat.sum() > 0.7  # of 65536 elements
    assert (flat.topk(32).values ** 2).sum() / (flat ** 2).sum() > 0.99


def test_simplex_rows_stay_probabilities_and_log_structured_stays_finite():
    p, t = _draw("kernelbench/level1/98", "simplex", 5)
    for x in (p, t):
        assert (x > 0).all() and torch.allclose(x.sum(-1), torch.ones(x.shape[0]), atol=1e-5)
    logits = _draw("kernelbench/level1/23", "log_structured", 5)[0]
    assert torch.isfinite(logits).all() and float(logits.max() - logits.min()) > 5  # exp-mass spread by decades


def test_offset_shifts_rows_by_a_random_sign():
    x = _draw("kernelbench/level1/40", "offset", 4)[0]
    means = x.reshape(x.shape[0], -1).mean(1)
    assert (means < 0).any() or (means > 0).all()  # signs random per row; at least shifted away from [0, 1)
    assert float(means.abs().max()) > 10


def test_integer_inputs_and_inputs_outside_broad_inputs_are_left_alone():
    idx_default = _draw("dlrm/1", "default", 9)
    idx_struct = _draw("dlrm/1", "structured", 9)
    assert torch.equal(idx_default[1], idx_struct[1]) and torch.equal(idx_default[2], idx_struct[2])
    assert not torch.equal(idx_default[0], idx_struct[0])
    hinge = get_problem("kernelbench/level1/100")  # targets are +-1 labels: broad_inputs = [0]
    d, s = _draw(hinge.id, "default", 2), _draw(hinge.id, "structured", 2)
    assert torch.equal(d[1], s[1]) and not torch.equal(d[0], s[0])


def test_every_structured_domain_is_known_and_listed_problems_stay_small():
    assert set(STRUCTURED_DOMAINS) <= set(DOMAINS)
    for p in list_problems():
        added = [d for d in p.domains if d in STRUCTURED_DOMAINS]
        assert len(added) <= 2, (p.id, added)  # one correctness trial per domain: keep them few


def test_a_malformed_reduced_field_names_the_entry():
    entry = {"id": "x/1", "name": "n", "file": "f.py", "family": "reduction", "reduced": [{"inputs": 0, "dim": 1}]}
    with pytest.raises(ProblemError, match="reduced"):
        _entry_to_problem(entry, get_problem("kernelbench/level1/47").path.parent)
    ok = dict(entry, reduced=[{"inputs": [0, 1], "dim": -1}])
    assert _entry_to_problem(ok, get_problem("kernelbench/level1/47").path.parent).reduced == (((0, 1), -1),)


def test_signs_keep_the_draw_its_zeros_and_its_symmetry_and_make_it_zero_mean():
    """``signs`` (13-15's zero-mean domain, their timed domain): the official draw with random signs."""
    for pid, structure_holds in (("kernelbench/level1/13", lambda a: torch.equal(a, a.T)),
                                 ("kernelbench/level1/14", lambda a: torch.equal(a, torch.triu(a))),
                                 ("kernelbench/level1/15", lambda a: torch.equal(a, torch.tril(a)))):
        base, x, again, other = (_draw(pid, "default", 5), _draw(pid, "signs", 5), _draw(pid, "signs", 5),
                                 _draw(pid, "signs", 6))
        for b, s, s2 in zip(base, x, again):
            assert structure_holds(b) and structure_holds(s), pid
            assert torch.equal(s.abs(), b.abs()) and torch.equal(s, s2)  # magnitudes kept; signs from the seed
            nz = b != 0
            assert 0.4 < float((s[nz] < 0).float().mean()) < 0.6, pid  # about half the signs flipped
        assert not torch.equal(x[0], other[0])  # another seed flips other elements
    from kbenv.rewards import precision as P
    assert all(P.timed_domain(get_problem(f"kernelbench/level1/{i}").domains, True) == "signs" for i in (13, 14, 15))


@pytest.mark.parametrize("domain", ["normal", "signed_uniform", "wide"])
def test_a_redraw_never_sits_beside_the_draw_it_replaces(domain, monkeypatch):
    """A broader domain's redraw is made once the problem's own draw is gone: at full size one input set is
    gigabytes (47's is 8 GiB), and the supervisor's memory plan counts one set in flight (stop 42 on an H100: the
    old draw, ``rand``, ``rand * 2`` and ``- 1`` held four sets at once and an honest candidate was blamed)."""
    import weakref

    import kbenv.problems as P
    drawn, alive_at_redraw = [], []
    cast = P.cast_value

    def tracked_cast(x, device, dtype):
        out = cast(x, device, dtype)
        if isinstance(out, torch.Tensor) and out.is_floating_point():
            drawn.append(weakref.ref(out))
        return out

    def tracked_redraw(shape, dtype, device, dom, gen):
        alive_at_redraw.append(sum(r() is not None for r in drawn))
        return redraw_as(shape, dtype, device, dom, gen)

    redraw_as = P.redraw_as
    monkeypatch.setattr(P, "cast_value", tracked_cast)
    monkeypatch.setattr(P, "redraw_as", tracked_redraw)
    x = _draw("kernelbench/level1/47", domain, 5)[0]
    assert alive_at_redraw == [0]
    monkeypatch.undo()
    assert torch.equal(x, _draw("kernelbench/level1/47", domain, 5)[0])  # the same values as untracked
    # and the values of the out-of-place arithmetic it replaced
    g = torch.Generator().manual_seed(11)
    want = {"normal": lambda: torch.randn(64, generator=g), "signed_uniform": lambda: torch.rand(64, generator=g) * 2 - 1,
            "wide": lambda: torch.randn(64, generator=g) * 100}[domain]()
    assert torch.equal(P.redraw(torch.zeros(64), domain, torch.Generator().manual_seed(11)), want)

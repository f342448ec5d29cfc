"""A candidate's lent region on the CPU is a memfd its own process holds: sealed at its size before any candidate
code runs, so that it can neither shrink it under the supervisor's mapping (a SIGBUS that would kill the
supervisor) nor grow it into host memory that no limit counts."""

import os

import pytest
import torch

from kbenv.sandbox.lent import LentRegion


def _memfd() -> int:
    return os.memfd_create("kbenv-lent-test", os.MFD_ALLOW_SEALING)


def test_a_candidates_region_cannot_be_shrunk_or_grown_by_the_other_holder_of_its_memfd():
    fd = _memfd()
    region = LentRegion(torch.device("cpu"), 1 << 16, fd, seal=True)
    try:
        other = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)  # as the executor holds it: its own descriptor
        for size in (0, 4096, 1 << 30):
            with pytest.raises(PermissionError):
                os.ftruncate(other, size)
        os.close(other)
        region.raw[-1] = 7  # the supervisor's mapping is whole
        assert int(region.raw[-1]) == 7 and os.fstat(fd).st_size == region.nbytes
    finally:
        region.close()
        os.close(fd)


def test_a_trusted_region_stays_resizable_for_its_next_lease():
    fd = _memfd()
    region = LentRegion(torch.device("cpu"), 1 << 16, fd, seal=False)
    region.close()
    bigger = LentRegion(torch.device("cpu"), 1 << 17, fd, seal=False)  # a kept baseline's next problem
    assert os.fstat(fd).st_size == 1 << 17
    bigger.close()
    os.close(fd)


def test_the_mutation_check_counts_changed_elements_chunk_by_chunk(monkeypatch):
    """Inputs are compared with the supervisor's copy in chunks (no mask the size of an input: 2 GiB for 47's
    8 GiB input at full size, stop 42), and the count is the whole comparison's."""
    from kbenv.sandbox import executors as E
    monkeypatch.setattr(E, "COMPARE_CHUNK", 7)
    want = torch.arange(50, dtype=torch.float32).reshape(5, 10)
    got = want.clone()
    assert E.changed_elements(got, want) == 0
    got.view(-1)[[0, 6, 7, 13, 49]] += 1  # on both sides of chunk boundaries
    assert E.changed_elements(got, want) == 5 == int((got != want).sum())
    assert E.changed_elements(got.t(), want.t()) == 5  # not contiguous: compared whole
    assert E.changed_elements(got[:4], want) == 40  # another shape: every element
    assert E.changed_elements(got.double(), want.double()) == 5
    nan = want.clone()
    nan[0, 0] = float("nan")
    assert E.changed_elements(nan.clone(), nan) == 0  # a NaN left as it was is unchanged
    assert E.changed_elements(want, nan) == 1

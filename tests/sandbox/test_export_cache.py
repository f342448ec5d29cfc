"""The executor's export of its outputs' allocations (``devshare.export_ipc``): one IPC export per allocation, keyed
by the driver's buffer id, so that memory freed and allocated again at the same address is exported anew and a
kept handle never names a freed allocation. The driver is faked here (no GPU on CI); test_gpu.py runs the real one
(outputs left in the executor's memory, judged there)."""

import ctypes

import pytest

from kbenv.sandbox import devshare


class FakeDriver:
    """Allocations as {start: (buffer id, size)}; handles are the buffer id written into the handle's bytes."""

    def __init__(self):
        self.allocs: dict[int, tuple[int, int]] = {}
        self.exports = 0

    def cuPointerGetAttributes(self, n, attrs, data, ptr):
        for start, (bid, size) in self.allocs.items():
            if start <= ptr < start + size:
                values = {7: bid, 11: start, 12: size}
                for i in range(n):
                    ctypes.c_ulonglong.from_address(data[i]).value = values[attrs[i]]
                return 0
        return 1  # CUDA_ERROR_INVALID_VALUE

    def cuIpcGetMemHandle(self, ref, base):
        self.exports += 1
        bid = self.allocs[base][0]
        ctypes.memmove(ctypes.addressof(ref._obj), bid.to_bytes(8, "little") * 8, devshare.IPC_HANDLE_BYTES)
        return 0


@pytest.fixture()
def driver(monkeypatch):
    d = FakeDriver()
    monkeypatch.setattr(devshare, "_lib", lambda: d)
    monkeypatch.setattr(devshare, "_EXPORTED", {})
    return d


def test_one_export_per_allocation_and_offsets_within_it(driver):
    driver.allocs[0x1000_0000] = (41, 1 << 20)
    h1, off1, size = devshare.export_ipc(0x1000_0000 + 512)
    h2, off2, _ = devshare.export_ipc(0x1000_0000 + 4096)
    assert h1 == h2 and (off1, off2, size) == (512, 4096, 1 << 20)
    assert driver.exports == 1  # the second call of the slot reuses the allocation's handle


def test_memory_allocated_again_at_the_same_address_is_exported_anew(driver):
    driver.allocs[0x2000_0000] = (7, 1 << 20)
    old, _, _ = devshare.export_ipc(0x2000_0000)
    driver.allocs[0x2000_0000] = (8, 1 << 20)  # freed (empty_cache) and allocated again: a new buffer id
    new, _, _ = devshare.export_ipc(0x2000_0000)
    assert old != new and driver.exports == 2


def test_memory_the_driver_does_not_know_is_not_exported(driver):
    with pytest.raises(devshare.DevShareError):
        devshare.export_ipc(0xdead_0000)
    assert driver.exports == 0


def test_the_kept_handles_are_bounded(driver, monkeypatch):
    monkeypatch.setattr(devshare, "MAX_EXPORTED", 4)
    for i in range(10):
        driver.allocs[0x1_0000_0000 + (i << 24)] = (100 + i, 1 << 20)
        devshare.export_ipc(0x1_0000_0000 + (i << 24))
    assert len(devshare._EXPORTED) == 4 and driver.exports == 10

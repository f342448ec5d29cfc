"""The channel's parsing of what the worker sends: descriptors are data, checked before any copy."""

import os

import pytest
import torch

from kbenv.sandbox import wire


def _arena_with(t: torch.Tensor):
    fd = os.memfd_create("test-arena", 0)
    arena = wire.TensorArena(fd)
    return arena, arena.put(t)


def test_round_trip_through_the_arena():
    x = torch.randn(3, 5)
    arena, desc = _arena_with(x)
    assert torch.equal(arena.get(desc), x)
    arena.close()


@pytest.mark.parametrize("bad", [
    {"offset": 1 << 40},                       # past the end of the buffer
    {"nbytes": 4},                             # sizes disagree with the shape
    {"shape": [-3, 5]},                        # negative extent
    {"dtype": "object"},                       # not a tensor dtype
    {"shape": "xyz"},                          # wrong type
])
def test_forged_descriptor_is_a_protocol_violation(bad):
    arena, desc = _arena_with(torch.randn(3, 5))
    with pytest.raises(wire.ChannelClosed):
        arena.get({**desc, **bad})
    arena.close()


def test_descriptor_that_is_not_a_map_is_rejected():
    with pytest.raises(wire.ChannelClosed):
        wire.parse_descriptor(["float32", [3], 0, 12], 1 << 20)


def test_descriptor_within_bounds_is_accepted():
    dtype, shape, off, nbytes = wire.parse_descriptor(
        {"dtype": "float32", "shape": [4, 2], "offset": 256, "nbytes": 32}, 288)
    assert (dtype, shape, off, nbytes) == (torch.float32, [4, 2], 256, 32)
    with pytest.raises(wire.ChannelClosed):
        wire.parse_descriptor({"dtype": "float32", "shape": [4, 2], "offset": 257, "nbytes": 32}, 288)

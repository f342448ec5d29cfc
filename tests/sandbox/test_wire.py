"""The channel's framing: what the executor sends is data, parsed within bounds or refused."""

import os
import struct

import pytest

from kbenv.sandbox import wire


def _pipe_with(data: bytes) -> int:
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    return r


def test_a_frame_round_trips():
    r, w = os.pipe()
    wire.write_frame(w, {"type": "done", "claims": [None]})
    assert wire.read_frame(r) == {"type": "done", "claims": [None]}


@pytest.mark.parametrize("data", [
    struct.pack(">I", wire.MAX_FRAME + 1) + b"x",        # longer than the limit
    struct.pack(">I", 3) + b"\xc1\xc1\xc1",             # not msgpack
    struct.pack(">I", 2) + b"\x93\x01",                  # truncated
    struct.pack(">I", 1) + b"\x01",                       # not a map
])
def test_a_malformed_frame_is_a_closed_channel(data):
    with pytest.raises(wire.ChannelClosed):
        wire.read_frame(_pipe_with(data))


def test_a_missing_frame_times_out():
    r, _w = os.pipe()
    import time
    with pytest.raises(wire.ChannelTimeout):
        wire.read_frame(r, time.monotonic() + 0.05)

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


def _full_pipe() -> tuple[int, int]:
    """A pipe whose write end is non-blocking (the supervisor's) and full to the last byte, nobody reading."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    for size in (4096, 1):
        try:
            while True:
                os.write(w, b"\xff" * size)
        except BlockingIOError:
            pass
    return r, w


def test_a_frame_to_a_pipe_its_reader_keeps_full_fails_at_its_deadline_instead_of_blocking():
    """The executor can refill its own pipe (/proc/self/fd, known-bad 19:fill_own_pipe) and stop reading it."""
    import time
    r, w = _full_pipe()
    t0 = time.monotonic()
    with pytest.raises(wire.ChannelTimeout):
        wire.write_frame(w, {"type": "call", "inputs": [], "outputs": []}, time.monotonic() + 0.2)
    assert time.monotonic() - t0 < 5
    os.close(r)
    os.close(w)


def test_an_executor_that_leaves_its_pipe_full_is_a_closed_channel(monkeypatch):
    from pathlib import Path

    from kbenv.sandbox import process
    monkeypatch.setattr(process, "SEND_TIMEOUT_S", 0.2)
    r, w = _full_pipe()
    p = process.ExecutorProcess(None, w, r, -1, Path("/nonexistent"))
    with pytest.raises(wire.ChannelClosed, match="pipe full"):
        p.send({"type": "call", "inputs": [], "outputs": []})
    os.close(r)
    os.close(w)


def test_a_frame_larger_than_the_pipe_goes_through_a_non_blocking_end_while_read():
    """The setup frame (problem and candidate sources) can exceed a pipe's 64 KiB: written in parts as read."""
    import threading
    import time
    r, w = os.pipe()
    os.set_blocking(w, False)
    got = {}
    reader = threading.Thread(target=lambda: got.update(frame=wire.read_frame(r, time.monotonic() + 10)))
    reader.start()
    wire.write_frame(w, {"type": "setup", "candidate_source": "x" * (1 << 20)}, time.monotonic() + 10)
    reader.join(10)
    assert got["frame"]["candidate_source"] == "x" * (1 << 20)
    os.close(r)
    os.close(w)


def _executor_reading(r: int):
    from pathlib import Path

    from kbenv.sandbox import process
    return process.ExecutorProcess(None, -1, r, -1, Path("/nonexistent"))


def test_an_executors_frame_above_the_reply_limit_is_refused_on_its_length_before_it_is_read():
    """A reply of one-byte empty maps costs the unpacking side ~72 bytes of Python objects per byte (known-bad
    19:reply_bomb): the supervisor refuses one above MAX_REPLY from its 4-byte length, reading no more of it."""
    import time
    n = wire.MAX_REPLY
    payload = b"\x82\xa4type\xa5reply\xa3pad\xdd" + struct.pack(">I", n) + b"\x80" * n
    r, w = os.pipe()
    os.set_blocking(w, False)
    os.write(w, struct.pack(">I", len(payload)) + payload[:1000])  # the rest never needs to be sent
    with pytest.raises(wire.ChannelClosed, match=f"exceeds the limit of {wire.MAX_REPLY}"):
        _executor_reading(r).recv(time.monotonic() + 5)
    assert len(os.read(r, 4096)) == 1000  # nothing past the length was read
    os.close(r)
    os.close(w)


def test_the_largest_honest_reply_fits_the_reply_limit_with_room():
    """A dones frame of the most slots a block has, four outputs left in place each, and the longest traceback an
    executor sends (4,000 characters, each two bytes in UTF-8) as the last call's error."""
    import threading
    import time

    import msgpack

    from kbenv.sandbox.memplan import MAX_SLOTS
    done = {"claims": [["ipc", b"h" * 64, (1 << 50) - 1]] * 4}
    frame = {"type": "dones", "dones": [done] * (MAX_SLOTS - 1)
             + [{"error": "\u00e9" * 4000, "category": "runtime", "where": "forward"}]}
    assert len(msgpack.packb(frame, use_bin_type=True)) * 8 < wire.MAX_REPLY
    r, w = os.pipe()
    os.set_blocking(w, False)
    got = {}
    reader = threading.Thread(target=lambda: got.update(frame=_executor_reading(r).recv(time.monotonic() + 10)))
    reader.start()
    wire.write_frame(w, frame, time.monotonic() + 10)
    reader.join(10)
    assert got["frame"] == frame
    os.close(r)
    os.close(w)

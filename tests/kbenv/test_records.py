"""Record log: round trip, crash recovery, corruption, resume keys, JSONL export, metadata."""

import json
import os
import struct
import threading
import zlib

import msgpack
import pytest

from kbenv import records as rec
from kbenv.records import (
    RecordLogCorrupt,
    RecordLogLocked,
    RecordWriter,
    completed_keys,
    export_jsonl,
    make_record,
    read_metadata,
    read_records,
    scan_records,
    write_metadata,
)


def eval_result(problem="kernelbench/level1/19", verdict="pass", speedup=1.25):
    return {
        "problem": problem,
        "family": "activation",
        "device": "cpu",
        "gpu": None,
        "size": "small",
        "precision": "fp32",
        "candidate_sha256": "ab" * 32,
        "verdict": verdict,
        "category": None if verdict == "pass" else "compile",
        "reason": "all checks passed",
        "correct": verdict == "pass",
        "reward": 0.5,
        "reward_fn": "speedup",
        "reward_components": {"speedup": speedup, "gate": 1.0},
        "speedup": speedup,
        "speedup_meaningful": False,
        "baseline": {"eager_ms": 1.0, "compile_ms": None, "best_ms": 1.0, "best": "eager"},
        "timings": {"median_ms": 0.8, "trials": 10},
        "checks": [{"name": "relative_frobenius_error", "passed": True, "value": 1e-7, "threshold": 2e-2, "detail": ""}],
        "error": None,
        "phase_seconds": {"total": 1.5},
        "facts": {"threads": 1},
    }


def record(problem="kernelbench/level1/19", episode=0, turn=0, sample=0, **kw):
    return make_record(eval_result(problem, **kw), run_id="run-1", policy="test", episode=episode, turn=turn,
                       sample=sample, time_s=1_700_000_000.0 + turn)


def frame_offsets(path):
    """Start offset of every frame, parsed independently of the module under test."""
    data = path.read_bytes()
    offsets, pos = [], 0
    while pos + 4 <= len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        if pos + 8 + length > len(data):
            break
        offsets.append(pos)
        pos += 8 + length
    return offsets, pos


def test_round_trip_and_frame_format(tmp_path):
    written = [record(turn=t, speedup=1.0 + t) for t in range(3)]
    with RecordWriter(tmp_path) as writer:
        for r in written:
            writer.write(r)
    assert writer.closed
    assert read_records(tmp_path) == written

    # The on-disk format is the documented one: length, msgpack payload, CRC32 of the payload.
    data = (tmp_path / "records.msgpack").read_bytes()
    (length,) = struct.unpack(">I", data[:4])
    payload = data[4:4 + length]
    assert struct.unpack(">I", data[4 + length:8 + length])[0] == zlib.crc32(payload)
    assert msgpack.unpackb(payload) == written[0]


def test_missing_log_reads_empty(tmp_path):
    assert read_records(tmp_path / "nope") == []
    assert completed_keys(tmp_path / "nope") == set()


def test_crash_torn_tail_is_ignored_then_truncated_on_reopen(tmp_path):
    path = tmp_path / "records.msgpack"
    with RecordWriter(tmp_path) as writer:
        for t in range(3):
            writer.write(record(turn=t))
    offsets, end = frame_offsets(path)
    assert len(offsets) == 3 and end == path.stat().st_size

    # Crash mid-way through the third frame, then a second, garbage half-frame after it.
    with open(path, "r+b") as handle:
        handle.truncate(offsets[2] + 7)
    with open(path, "ab") as handle:
        handle.write(struct.pack(">I", 5000) + b"\x93garbage")
    torn = path.stat().st_size - offsets[2]

    scan = scan_records(tmp_path)
    assert [r["turn"] for r in scan.records] == [0, 1]
    assert scan.valid_bytes == offsets[2]
    assert scan.torn_tail_bytes == torn
    assert [r["turn"] for r in read_records(tmp_path)] == [0, 1]

    with RecordWriter(tmp_path) as writer:
        assert writer.truncated_bytes == torn
        assert path.stat().st_size == offsets[2]
        writer.write(record(turn=2))
        writer.write(record(turn=3))
    scan = scan_records(tmp_path)
    assert [r["turn"] for r in scan.records] == [0, 1, 2, 3]
    assert scan.torn_tail_bytes == 0


def test_whole_last_frame_with_bad_crc_is_a_torn_tail(tmp_path):
    path = tmp_path / "records.msgpack"
    with RecordWriter(tmp_path) as writer:
        for t in range(3):
            writer.write(record(turn=t))
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF  # inside the last frame's payload
    path.write_bytes(bytes(data))
    scan = scan_records(tmp_path)
    assert [r["turn"] for r in scan.records] == [0, 1]
    assert scan.torn_tail_bytes > 0


def test_zero_filled_tail_is_not_read_as_empty_frames(tmp_path):
    path = tmp_path / "records.msgpack"
    with RecordWriter(tmp_path) as writer:
        writer.write(record())
    with open(path, "ab") as handle:
        handle.write(b"\x00" * 64)
    scan = scan_records(tmp_path)
    assert len(scan.records) == 1
    assert scan.torn_tail_bytes == 64


def test_corruption_in_the_middle_raises(tmp_path):
    path = tmp_path / "records.msgpack"
    with RecordWriter(tmp_path) as writer:
        for t in range(3):
            writer.write(record(turn=t))
    offsets, _ = frame_offsets(path)
    data = bytearray(path.read_bytes())
    data[offsets[1] + 20] ^= 0xFF  # a payload byte of the middle frame
    path.write_bytes(bytes(data))

    with pytest.raises(RecordLogCorrupt) as info:
        read_records(tmp_path)
    assert info.value.offset == offsets[1]
    assert info.value.next_valid_offset == offsets[2]
    assert "CRC mismatch" in str(info.value) and "not a torn tail" in str(info.value)
    with pytest.raises(RecordLogCorrupt):
        completed_keys(tmp_path)
    # A writer refuses to append to (or truncate) a corrupt log, and leaves it as it was.
    with pytest.raises(RecordLogCorrupt):
        RecordWriter(tmp_path)
    assert path.read_bytes() == bytes(data)


def test_corrupt_length_field_in_the_middle_raises(tmp_path):
    path = tmp_path / "records.msgpack"
    with RecordWriter(tmp_path) as writer:
        for t in range(3):
            writer.write(record(turn=t))
    data = bytearray(path.read_bytes())
    data[0:4] = struct.pack(">I", 0xFFFFFF)  # first frame now claims far more bytes than the file holds
    path.write_bytes(bytes(data))
    with pytest.raises(RecordLogCorrupt) as info:
        read_records(tmp_path)
    assert info.value.offset == 0


def test_completed_keys_for_resuming(tmp_path):
    with RecordWriter(tmp_path) as writer:
        writer.write(record("kernelbench/level1/19", episode=0, turn=0))
        writer.write(record("kernelbench/level1/19", episode=0, turn=1))
        writer.write(record("kernelbench/level1/23", episode=2, turn=0, sample=1))
    assert completed_keys(tmp_path) == {
        ("kernelbench/level1/19", 0, 0),
        ("kernelbench/level1/19", 0, 1),
        ("kernelbench/level1/23", 2, 0),
    }
    assert completed_keys(tmp_path, key_fields=("problem", "episode", "sample")) == {
        ("kernelbench/level1/19", 0, 0),
        ("kernelbench/level1/23", 2, 1),
    }
    assert completed_keys(tmp_path, key_fields=("problem",)) == {("kernelbench/level1/19",), ("kernelbench/level1/23",)}
    with pytest.raises(KeyError, match="no_such_field"):
        completed_keys(tmp_path, key_fields=("problem", "no_such_field"))


def test_jsonl_export_round_trip(tmp_path):
    written = [record(turn=t, speedup=0.5 * (t + 1)) for t in range(4)]
    written[2] = record(turn=2, verdict="fail", speedup=None)
    with RecordWriter(tmp_path / "run") as writer:
        for r in written:
            writer.write(r)
    out = tmp_path / "export.jsonl"
    assert export_jsonl(tmp_path / "run", out) == 4
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == written


def test_jsonl_export_refuses_non_finite_floats(tmp_path):
    bad = record()
    bad["reward_components"]["speedup"] = float("nan")
    with RecordWriter(tmp_path / "run") as writer:
        writer.write(bad)
    out = tmp_path / "export.jsonl"
    with pytest.raises(ValueError, match=r"record\.reward_components\.speedup"):
        export_jsonl(tmp_path / "run", out)
    assert not out.exists()


def test_write_validates_run_fields(tmp_path):
    with RecordWriter(tmp_path) as writer:
        with pytest.raises(ValueError, match="run field 'turn'"):
            writer.write({k: v for k, v in record().items() if k != "turn"})
        bad = record()
        bad["episode"] = True
        with pytest.raises(TypeError, match="'episode'"):
            writer.write(bad)
        with pytest.raises(TypeError):
            writer.write(["not", "a", "dict"])
        with pytest.raises(ValueError, match="already has run field"):
            make_record(record(), run_id="r", policy="p", episode=0, turn=0)
    assert read_records(tmp_path) == []
    with pytest.raises(ValueError, match="closed"):
        writer.write(record())


def test_fsync_batching(tmp_path, monkeypatch):
    calls = []
    real_fsync = os.fsync
    monkeypatch.setattr(rec.os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd))[1])
    writer = RecordWriter(tmp_path, fsync_every=3)
    calls.clear()  # opening a new log fsyncs its directory
    for t in range(7):
        writer.write(record(turn=t))
    assert len(calls) == 2  # after records 3 and 6
    writer.close()
    assert len(calls) == 3  # the 7th, on close
    assert len(read_records(tmp_path)) == 7

    calls.clear()
    with RecordWriter(tmp_path) as writer:  # default: every record
        writer.write(record(turn=7))
        writer.write(record(turn=8))
        assert len(calls) == 2
    assert len(calls) == 2  # nothing left to sync on close
    with pytest.raises(ValueError):
        RecordWriter(tmp_path, fsync_every=0)


def test_concurrent_writes_from_threads(tmp_path):
    n_threads, per_thread = 8, 50
    with RecordWriter(tmp_path, fsync_every=25) as writer:
        def work(thread):
            for i in range(per_thread):
                writer.write(record(episode=thread, turn=i))
        threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    scan = scan_records(tmp_path)
    assert scan.torn_tail_bytes == 0
    assert sorted((r["episode"], r["turn"]) for r in scan.records) == [
        (k, i) for k in range(n_threads) for i in range(per_thread)
    ]


def test_second_writer_is_refused(tmp_path):
    with RecordWriter(tmp_path) as writer:
        writer.write(record())
        with pytest.raises(RecordLogLocked):
            RecordWriter(tmp_path)
    with RecordWriter(tmp_path) as writer:
        writer.write(record(turn=1))
    assert len(read_records(tmp_path)) == 2


def test_metadata_keeps_created_and_updates_updated(tmp_path, monkeypatch):
    clock = iter([1000.0, 2000.0, 3000.0])
    monkeypatch.setattr(rec.time, "time", lambda: next(clock))
    first = write_metadata(tmp_path / "run", {"env": "kbenv/KernelBench-v1", "policy": "a"})
    assert first == {"env": "kbenv/KernelBench-v1", "policy": "a", "created": 1000.0, "updated": 1000.0}
    second = write_metadata(tmp_path / "run", {"policy": "b", "finished": True})
    assert second == {"env": "kbenv/KernelBench-v1", "policy": "b", "finished": True,
                      "created": 1000.0, "updated": 2000.0}
    assert read_metadata(tmp_path / "run") == second
    with pytest.raises(ValueError, match="created"):
        write_metadata(tmp_path / "run", {"created": 5.0})
    assert read_metadata(tmp_path / "run")["created"] == 1000.0
    with pytest.raises(FileNotFoundError):
        read_metadata(tmp_path / "other")


# -- complete records (issue 15) ------------------------------------------------------------------------------

TEXTS = {"messages": [{"role": "system", "content": "be fast"}, {"role": "user", "content": "x" * 5000}],
         "reply": "here:\n```python\nclass ModelNew: ...\n```", "candidate": "class ModelNew: ...\n"}


def test_a_record_keeps_its_texts_compressed_and_reads_them_back(tmp_path):
    r = make_record(eval_result(), run_id="r", policy="p", episode=0, turn=0, texts=TEXTS)
    assert isinstance(r[rec.TEXTS_FIELD], bytes) and len(r[rec.TEXTS_FIELD]) < 1000  # 5 kB prompt compressed
    with RecordWriter(tmp_path) as w:
        w.write(r)
        w.write(record(turn=1))
    back = read_records(tmp_path)
    assert rec.record_texts(back[0]) == TEXTS and rec.record_texts(back[1]) == {}


def test_export_decodes_texts_and_verified_only_keeps_passing_turns_as_prompt_completion(tmp_path):
    with RecordWriter(tmp_path / "run") as w:
        w.write(make_record(eval_result(), run_id="r", policy="p", episode=0, turn=0, texts=TEXTS))
        w.write(make_record(eval_result(verdict="fail", speedup=None), run_id="r", policy="p", episode=1, turn=0,
                            texts=TEXTS))
        w.write(record(episode=2))  # passing, but no texts: nothing to train on
    assert export_jsonl(tmp_path / "run", tmp_path / "all.jsonl") == 3
    lines = [json.loads(x) for x in (tmp_path / "all.jsonl").read_text().splitlines()]
    assert lines[0]["texts"] == TEXTS and rec.TEXTS_FIELD not in lines[0] and "texts" not in lines[2]
    assert export_jsonl(tmp_path / "run", tmp_path / "sft.jsonl", verified_only=True) == 1
    row = json.loads((tmp_path / "sft.jsonl").read_text())
    assert row["prompt"] == TEXTS["messages"]
    assert row["completion"] == [{"role": "assistant", "content": TEXTS["reply"]}]
    assert row["problem_id"] == "kernelbench/level1/19" and row["speedup"] == 1.25


def test_completed_keys_can_count_only_finished_episodes(tmp_path):
    with RecordWriter(tmp_path) as w:
        for episode, done in ((0, True), (1, False)):
            r = record(episode=episode)
            r["episode_done"] = done
            w.write(r)
    assert completed_keys(tmp_path, ("problem", "episode", "sample"), done_field="episode_done") == {
        ("kernelbench/level1/19", 0, 0)}


def test_require_run_names_a_missing_run(tmp_path):
    from kbenv.errors import RunNotFound
    with pytest.raises(RunNotFound, match="does not exist"):
        rec.require_run(tmp_path / "nope")
    with pytest.raises(RunNotFound, match="holds no records.msgpack"):
        rec.require_run(tmp_path)
    with RecordWriter(tmp_path) as w:
        w.write(record())
    assert rec.require_run(tmp_path) == tmp_path


def test_texts_keep_a_reply_with_a_lone_surrogate():
    """A model's JSON ``\\ud800`` decodes to a lone surrogate, which UTF-8 cannot hold: the record keeps it as it
    came (its candidate is refused as a ``compile`` failure: ``protocol.source_fault``)."""
    from kbenv.records import pack_texts, record_texts, TEXTS_FIELD
    texts = {"reply": "x = '\ud800' \u00e9", "candidate": "\udcff", "messages": [{"role": "user", "content": "\u4e2d"}]}
    assert record_texts({TEXTS_FIELD: pack_texts(texts)}) == texts

"""Append-only record log of a rollout run.

A run directory holds two files:

``records.msgpack``
    One frame per record, appended and never rewritten. A frame is::

        4-byte big-endian payload length | msgpack payload | 4-byte big-endian CRC32 of the payload

    The payload is a msgpack map. A process that dies mid-write leaves a *torn* final frame (short, or whole
    but with a CRC that does not match). Readers ignore a torn tail and report its size; a writer that
    reopens the file truncates it away before appending. A bad frame followed by a good one is not a crash
    artefact but corruption, and every reader raises :class:`RecordLogCorrupt` for it rather than guess.

``metadata.json``
    Run-level facts (config, policy, environment id, ...) written with :func:`write_metadata`.

A record is an EvalResult dict (docs/result-schema.md) plus the run fields in :data:`RUN_FIELDS`; build one
with :func:`make_record`. :class:`RecordWriter` checks the run fields on every write, so a rollout that
resumes through :func:`completed_keys` can rely on them.

A record may also keep the texts of its turn under :data:`TEXTS_FIELD`: the chat ``messages`` sent to the
model, its raw ``reply`` and the extracted ``candidate`` source, as zlib-compressed JSON (a turn's prompt holds
the problem's whole source, and compresses about 4x). :func:`record_texts` reads them back;
:func:`export_jsonl` writes them out as plain strings, and with ``verified_only`` writes the passing turns as
prompt/completion rows for supervised fine-tuning.
"""

from __future__ import annotations

import json
import logging
import math
import os
import struct
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import msgpack

try:  # POSIX only; without it a second writer on the same run is not detected.
    import fcntl
except ImportError:  # pragma: no cover - not a supported platform for kbenv
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "RECORDS_FILENAME",
    "METADATA_FILENAME",
    "RUN_FIELDS",
    "DEFAULT_KEY_FIELDS",
    "MAX_PAYLOAD_BYTES",
    "RecordLogCorrupt",
    "RecordLogLocked",
    "RecordScan",
    "RecordWriter",
    "make_record",
    "scan_records",
    "read_records",
    "completed_keys",
    "export_jsonl",
    "TEXTS_FIELD",
    "pack_texts",
    "record_texts",
    "require_run",
    "sft_row",
    "write_metadata",
    "read_metadata",
]

log = logging.getLogger(__name__)

RECORDS_FILENAME = "records.msgpack"
METADATA_FILENAME = "metadata.json"

#: Fields a record carries on top of the EvalResult, with the types :class:`RecordWriter` accepts.
RUN_FIELDS: dict[str, tuple[type, ...]] = {
    "run_id": (str,),
    "policy": (str,),
    "episode": (int,),
    "turn": (int,),
    "sample": (int,),
    "time": (float, int),  # unix seconds
}

DEFAULT_KEY_FIELDS = ("problem", "episode", "turn")

#: The record field holding the turn's texts (zlib-compressed UTF-8 JSON: ``messages``, ``reply``, ``candidate``).
TEXTS_FIELD = "texts_zlib"

#: Largest payload a frame may declare. An EvalResult is a few KiB (its error text is capped at 4000 chars);
#: the cap keeps a garbage length field from being taken for a frame that swallows the rest of the file.
MAX_PAYLOAD_BYTES = 64 * 1024 * 1024

_HEADER = struct.Struct(">I")
_FRAME_OVERHEAD = 2 * _HEADER.size


class RecordLogCorrupt(RuntimeError):
    """A frame that is not the last one in the file failed to parse: the log is damaged, not torn."""

    def __init__(self, path: Path, offset: int, next_valid_offset: int, reason: str):
        self.path = path
        self.offset = offset
        self.next_valid_offset = next_valid_offset
        self.reason = reason
        super().__init__(
            f"{path}: bad frame at byte {offset} ({reason}), but a valid frame follows at byte "
            f"{next_valid_offset}; this is corruption in the middle of the log, not a torn tail from a crash. "
            f"Restore the file from a copy, or cut it at byte {offset} by hand if the later records may be lost."
        )


class RecordLogLocked(RuntimeError):
    """Another RecordWriter (this process or another) has the run's record log open."""


@dataclass(frozen=True)
class RecordScan:
    """What :func:`scan_records` found in a record log.

    Attributes:
        records: every whole record, in the order written.
        valid_bytes: length of the prefix made of whole frames; a writer truncates the file to this.
        torn_tail_bytes: bytes after ``valid_bytes`` that form no whole frame (0 for a clean log).
        path: the file scanned.
    """

    records: list[dict] = field(repr=False)
    valid_bytes: int
    torn_tail_bytes: int
    path: Path


def _encode_frame(record: Mapping[str, Any]) -> bytes:
    payload = msgpack.packb(record, use_bin_type=True, strict_types=False)
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"record encodes to {len(payload)} bytes, over MAX_PAYLOAD_BYTES={MAX_PAYLOAD_BYTES}")
    return _HEADER.pack(len(payload)) + payload + _HEADER.pack(zlib.crc32(payload) & 0xFFFFFFFF)


def _decode_frame(buf: bytes | memoryview, offset: int) -> tuple[dict | None, int, str]:
    """Parse the frame at ``offset``: ``(record, end_offset, "")`` or ``(None, offset, reason)``."""
    size = len(buf)
    if size - offset < _HEADER.size:
        return None, offset, "incomplete length field"
    (length,) = _HEADER.unpack_from(buf, offset)
    # A zero length is rejected too: a zero-filled tail (file grown, data never written) would otherwise
    # read as a run of empty frames whose CRC, crc32(b"") == 0, matches.
    if length == 0 or length > MAX_PAYLOAD_BYTES:
        return None, offset, f"implausible payload length {length}"
    end = offset + _FRAME_OVERHEAD + length
    if end > size:
        return None, offset, f"frame declares {length} payload bytes, file ends first"
    payload = bytes(buf[offset + _HEADER.size : offset + _HEADER.size + length])
    (stored_crc,) = _HEADER.unpack_from(buf, end - _HEADER.size)
    if zlib.crc32(payload) & 0xFFFFFFFF != stored_crc:
        return None, offset, "CRC mismatch"
    try:
        record = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types on bad input
        return None, offset, f"payload is not msgpack ({type(exc).__name__})"
    if not isinstance(record, dict):
        return None, offset, f"payload is a {type(record).__name__}, not a map"
    return record, end, ""


def _find_next_frame(buf: bytes | memoryview, start: int) -> int | None:
    # Only the bytes after a bad frame are searched: for a torn tail that is at most one frame's worth, and
    # for real corruption the next frame boundary is usually close.
    for offset in range(start, len(buf) - _FRAME_OVERHEAD):
        record, _, _ = _decode_frame(buf, offset)
        if record is not None:
            return offset
    return None


def _records_path(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / RECORDS_FILENAME


def _scan_bytes(buf: bytes, path: Path) -> RecordScan:
    records: list[dict] = []
    offset = 0
    while offset < len(buf):
        record, end, reason = _decode_frame(buf, offset)
        if record is None:
            next_valid = _find_next_frame(buf, offset + 1)
            if next_valid is not None:
                raise RecordLogCorrupt(path, offset, next_valid, reason)
            break
        records.append(record)
        offset = end
    return RecordScan(records=records, valid_bytes=offset, torn_tail_bytes=len(buf) - offset, path=path)


def scan_records(run_dir: str | os.PathLike) -> RecordScan:
    """Read a run's record log and say how much of it is whole.

    A missing file reads as an empty log. A torn tail (a short or CRC-failing final frame, or trailing
    bytes that form no frame) is left out and measured in ``torn_tail_bytes``.

    Raises:
        RecordLogCorrupt: a bad frame is followed by a valid one.
    """
    path = _records_path(run_dir)
    try:
        buf = path.read_bytes()
    except FileNotFoundError:
        return RecordScan(records=[], valid_bytes=0, torn_tail_bytes=0, path=path)
    return _scan_bytes(buf, path)


def read_records(run_dir: str | os.PathLike) -> list[dict]:
    """Every whole record of a run, in the order written.

    A torn tail is skipped with a logged warning (see :func:`scan_records` for its size).

    Raises:
        RecordLogCorrupt: corruption in the middle of the log.
    """
    scan = scan_records(run_dir)
    if scan.torn_tail_bytes:
        log.warning(
            "%s: ignoring a torn tail of %d bytes after %d whole records (an interrupted write)",
            scan.path,
            scan.torn_tail_bytes,
            len(scan.records),
        )
    return scan.records


def completed_keys(
    run_dir: str | os.PathLike, key_fields: Iterable[str] = DEFAULT_KEY_FIELDS, *, done_field: str | None = None
) -> set[tuple]:
    """Keys of the work already recorded in a run, for resuming it.

    Each key is the tuple of ``record[f] for f in key_fields`` (a tuple even for one field). A rollout skips
    any unit of work whose key is in the set. A missing log gives an empty set. With ``done_field``, only
    records whose ``done_field`` is true count (the rollout passes ``episode_done`` with key fields
    ``problem, episode, sample``: an episode cut off mid-way is played again from its first turn).

    Raises:
        KeyError: a record lacks one of ``key_fields``.
        RecordLogCorrupt: corruption in the middle of the log.
    """
    fields = tuple(key_fields)
    if not fields:
        raise ValueError("key_fields is empty")
    keys: set[tuple] = set()
    for index, record in enumerate(read_records(run_dir)):
        if done_field is not None and not record.get(done_field):
            continue
        missing = [f for f in fields if f not in record]
        if missing:
            raise KeyError(f"record {index} in {_records_path(run_dir)} has no field(s) {missing}")
        keys.add(tuple(record[f] for f in fields))
    return keys


def make_record(
    result: Mapping[str, Any],
    *,
    run_id: str,
    policy: str,
    episode: int,
    turn: int,
    sample: int = 0,
    time_s: float | None = None,
    texts: Mapping[str, Any] | None = None,
) -> dict:
    """An EvalResult dict plus the run fields: the unit :meth:`RecordWriter.write` stores.

    ``time_s`` defaults to now (unix seconds). The run fields must not already be in ``result``. ``texts``
    (``messages``, ``reply``, ``candidate``; any JSON-able values) is kept compressed under
    :data:`TEXTS_FIELD` (see :func:`pack_texts`).
    """
    clash = sorted(set(RUN_FIELDS) & set(result))
    if clash:
        raise ValueError(f"result already has run field(s) {clash}")
    record = dict(result)
    record.update(
        run_id=run_id,
        policy=policy,
        episode=episode,
        turn=turn,
        sample=sample,
        time=time.time() if time_s is None else float(time_s),
    )
    if texts is not None:
        record[TEXTS_FIELD] = pack_texts(texts)
    return record


def pack_texts(texts: Mapping[str, Any]) -> bytes:
    """``texts`` as zlib-compressed JSON (what :data:`TEXTS_FIELD` holds), ASCII with escapes, so that a reply holding a
    lone surrogate (a model's JSON ``\\ud800`` decodes to one, and UTF-8 has none) is kept as it came."""
    return zlib.compress(json.dumps(dict(texts)).encode("ascii"), 6)


def record_texts(record: Mapping[str, Any]) -> dict:
    """The texts a record keeps (``messages``, ``reply``, ``candidate``), or ``{}`` for a record without them."""
    blob = record.get(TEXTS_FIELD)
    if not blob:
        return {}
    return json.loads(zlib.decompress(blob).decode("utf-8"))


def require_run(run_dir: str | os.PathLike) -> Path:
    """``run_dir`` as a Path, if it holds a record log.

    Raises:
        RunNotFound: no ``records.msgpack`` there (a mistyped path, or a run that never started).
    """
    from kbenv.errors import RunNotFound

    path = _records_path(run_dir)
    if not path.is_file():
        what = "does not exist" if not Path(run_dir).exists() else f"holds no {RECORDS_FILENAME}"
        raise RunNotFound(str(run_dir), f"no run here (the directory {what})")
    return Path(run_dir)


def _check_record(record: Any) -> None:
    if not isinstance(record, Mapping):
        raise TypeError(f"a record is a dict, got {type(record).__name__}")
    if not isinstance(record.get("problem"), str):
        raise ValueError("record has no str 'problem' (an EvalResult field)")
    for name, types in RUN_FIELDS.items():
        if name not in record:
            raise ValueError(f"record for {record['problem']!r} has no run field {name!r}; build it with make_record")
        value = record[name]
        if isinstance(value, bool) or not isinstance(value, types):
            raise TypeError(
                f"record field {name!r} must be {' or '.join(t.__name__ for t in types)}, "
                f"got {type(value).__name__}"
            )
    bad_keys = [k for k in record if not isinstance(k, str)]
    if bad_keys:
        raise TypeError(f"record keys must be str, got {bad_keys[:3]!r}")


def _fsync_dir(path: Path) -> None:
    # Makes a newly created or renamed file's directory entry durable.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class RecordWriter:
    """Appends records to ``RUN_DIR/records.msgpack``.

    Opening creates the run directory and file if needed. If the file ends in a torn frame (the previous
    writer died mid-write) the torn bytes are truncated away first, so new frames follow the last whole one.
    Only one writer may have a run open at a time; a second raises :class:`RecordLogLocked`.

    Every :meth:`write` hands the whole frame to the OS in one ``write`` call, so a crash of this process
    loses nothing already written. ``fsync_every`` sets durability against power loss or a kernel crash:
    1 (default) fsyncs every record; N fsyncs every Nth record, so up to N-1 records can be lost that way;
    :meth:`sync` and :meth:`close` always fsync.

    Methods are thread-safe. Use as a context manager, or call :meth:`close`.

    Raises (on open):
        RecordLogCorrupt: the existing log is corrupt in the middle; appending to it is refused.
        RecordLogLocked: another writer holds the log.
    """

    def __init__(self, run_dir: str | os.PathLike, *, fsync_every: int = 1):
        if isinstance(fsync_every, bool) or not isinstance(fsync_every, int) or fsync_every < 1:
            raise ValueError(f"fsync_every must be an int >= 1, got {fsync_every!r}")
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / RECORDS_FILENAME
        self.fsync_every = fsync_every
        self._lock = threading.Lock()
        self._unsynced = 0
        self.records_written = 0
        #: Bytes of torn tail removed when this writer opened the log (0 for a clean log).
        self.truncated_bytes = 0

        self.run_dir.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise RecordLogLocked(f"{self.path} is open in another RecordWriter") from None
            # Scanned under the lock, so no other writer can be appending while we decide what to cut.
            scan = _scan_bytes(self._read_all(), self.path)
            if scan.torn_tail_bytes:
                log.warning(
                    "%s: truncating a torn tail of %d bytes after %d whole records",
                    self.path,
                    scan.torn_tail_bytes,
                    len(scan.records),
                )
                os.ftruncate(self._fd, scan.valid_bytes)
                os.fsync(self._fd)
                self.truncated_bytes = scan.torn_tail_bytes
            if created:
                _fsync_dir(self.run_dir)
        except BaseException:
            os.close(self._fd)  # closing also releases the flock
            self._fd = None
            raise

    def _read_all(self) -> bytes:
        chunks = []
        offset = 0
        while True:
            chunk = os.pread(self._fd, 1 << 20, offset)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            offset += len(chunk)

    @property
    def closed(self) -> bool:
        return self._fd is None

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record (an EvalResult plus :data:`RUN_FIELDS`; see :func:`make_record`).

        Raises:
            TypeError, ValueError: the record lacks a run field, has one of the wrong type, or cannot be
                encoded; nothing is written.
            ValueError: the writer is closed.
        """
        _check_record(record)
        frame = _encode_frame(record)
        with self._lock:
            if self._fd is None:
                raise ValueError(f"RecordWriter for {self.path} is closed")
            view = memoryview(frame)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            self.records_written += 1
            self._unsynced += 1
            if self._unsynced >= self.fsync_every:
                os.fsync(self._fd)
                self._unsynced = 0

    def sync(self) -> None:
        """fsync records written since the last fsync."""
        with self._lock:
            if self._fd is not None and self._unsynced:
                os.fsync(self._fd)
                self._unsynced = 0

    def close(self) -> None:
        """fsync and close; closing twice is allowed."""
        with self._lock:
            if self._fd is None:
                return
            try:
                if self._unsynced:
                    os.fsync(self._fd)
                    self._unsynced = 0
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"RecordWriter({str(self.run_dir)!r}, fsync_every={self.fsync_every}, {state})"


def _atomic_write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def _find_nonfinite(value: Any, where: str) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return where
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = _find_nonfinite(item, f"{where}.{key}")
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _find_nonfinite(item, f"{where}[{index}]")
            if found:
                return found
    return None


def sft_row(record: Mapping[str, Any]) -> dict | None:
    """A prompt/completion row for supervised fine-tuning from a passing record that kept its texts, else None.

    The row is in TRL's conversational prompt-completion form: ``prompt`` is the chat sent to the model,
    ``completion`` is ``[{"role": "assistant", "content": reply}]``; ``problem_id``, ``reward``, ``speedup``,
    ``speedup_meaningful``, ``run_id``, ``episode``, ``turn`` ride along.
    """
    if record.get("verdict") != "pass":
        return None
    texts = record_texts(record)
    if not texts.get("messages") or texts.get("reply") is None:
        return None
    return {"prompt": list(texts["messages"]), "completion": [{"role": "assistant", "content": texts["reply"]}],
            "problem_id": record.get("problem"), "reward": record.get("reward"), "speedup": record.get("speedup"),
            "speedup_meaningful": record.get("speedup_meaningful"), "run_id": record.get("run_id"),
            "episode": record.get("episode"), "turn": record.get("turn")}


def export_jsonl(run_dir: str | os.PathLike, path: str | os.PathLike, *, verified_only: bool = False) -> int:
    """Write a run's records to ``path`` as JSON Lines, one per line; returns the number of lines.

    Each line is the record with its texts (:func:`record_texts`) under ``texts`` as plain strings, in place of
    the compressed field. With ``verified_only``, only passing records that kept their texts are written, each
    as a prompt/completion row for supervised fine-tuning (:func:`sft_row`).

    The output is strict JSON: a NaN or infinite float (which the schema does not allow) raises ValueError
    naming the record and field, and nothing is written. The file is replaced atomically.
    """
    out = Path(path)
    lines = []
    for index, record in enumerate(read_records(run_dir)):
        if verified_only:
            record = sft_row(record)
            if record is None:
                continue
        elif TEXTS_FIELD in record:
            texts = record_texts(record)
            record = {k: v for k, v in record.items() if k != TEXTS_FIELD}
            record["texts"] = texts
        try:
            lines.append(json.dumps(record, ensure_ascii=False, allow_nan=False))
        except ValueError:
            where = _find_nonfinite(record, "record") or "record"
            raise ValueError(
                f"record {index} ({record.get('problem')!r}) has a non-finite float at {where}; JSON cannot hold it"
            ) from None
    _atomic_write_text(out, "".join(line + "\n" for line in lines))
    return len(lines)


_metadata_lock = threading.Lock()


def read_metadata(run_dir: str | os.PathLike) -> dict:
    """The run's ``metadata.json``.

    Raises:
        FileNotFoundError: the run has none.
    """
    path = Path(run_dir) / METADATA_FILENAME
    with path.open(encoding="utf-8") as handle:
        return json.load(handle)


def write_metadata(run_dir: str | os.PathLike, metadata: Mapping[str, Any]) -> dict:
    """Merge ``metadata`` into the run's ``metadata.json`` and return what was written.

    Keys in ``metadata`` replace the same keys on disk (a shallow merge); other keys on disk stay. ``created``
    (unix seconds) is set by the first write and kept by later ones; ``updated`` is set to now on every
    write. Both are reserved: passing either raises ValueError. The file is replaced atomically. Safe across
    threads of one process, not across processes.
    """
    reserved = sorted({"created", "updated"} & set(metadata))
    if reserved:
        raise ValueError(f"{reserved} are set by write_metadata, not by the caller")
    directory = Path(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    with _metadata_lock:
        try:
            merged = read_metadata(directory)
        except FileNotFoundError:
            merged = {}
        now = time.time()
        created = merged.get("created", now)
        merged.update(metadata)
        merged["created"] = created
        merged["updated"] = now
        text = json.dumps(merged, indent=2, sort_keys=True, allow_nan=False) + "\n"
        _atomic_write_text(directory / METADATA_FILENAME, text)
    return merged

"""The typed frames between the trusted supervisor and an executor process, validated on arrival.

The executor (the candidate's process, or a trusted baseline process running the same code) is told only what
any call needs: where its inputs lie and where its outputs go, in memory the supervisor lends. Every call of an
evaluation looks the same from inside: no seed, domain, trial kind, sample position or flag ever travels.

Supervisor -> executor: :class:`Setup` once, then a :class:`Block` of :class:`Call` s per block of forwards (one
frame: the executor runs them back to back, with no read, reply or wake-up between two calls), then ``exit``.
Executor -> supervisor: ``ready`` (before any candidate code exists), a setup reply, one ``dones`` frame per block:
a :class:`Done` per call, up to and including the first that failed.

Everything the executor sends is hostile data. :func:`parse_setup_reply` and :func:`parse_dones` turn a frame
into a typed value or raise :class:`ProtocolViolation`, which the supervisor records as the candidate's
``crash``; nothing the executor sends can make trusted code raise anything else, and no claim in a frame can
make a candidate pass: claims can only fail it (a candidate that says it failed is believed, as it could have
failed anyway).
"""

from __future__ import annotations

import dataclasses

# Failure categories an executor may claim for itself: a claim only fails the candidate, never passes it.
CLAIMABLE = ("compile", "runtime", "oom", "crash", "timeout")
MAX_TEXT = 4000


# The most candidate source the supervisor takes (UTF-8 bytes). The supervisor parses it (the decoy's rewrite), and
# a syntax tree costs about 1.1 GB and 8 s (GIL held) per MiB of one-token statements (``a\n`` repeated, on a 2-core
# VM): a source at the 64 MiB frame limit would take the host's memory, and the supervisor with it. 128 KiB is 25
# times the longest known-good kernel (5 KB) and about what a 32k-token reply holds; its tree costs at most about
# 140 MB and 1 s.
MAX_SOURCE_BYTES = 128 << 10


def source_fault(source) -> str | None:
    """Why a candidate's source cannot be taken at all, or None: the candidate's ``compile`` failure, decided by
    ``Supervisor.evaluate`` before an executor, a reference or a build is spent on it and before anything parses it.
    Python source is UTF-8: a text with a lone surrogate (which a JSON ``\\ud800`` escape in a model's reply decodes
    to) has none, and it made the supervisor raise while it hashed the source (a harness fault from candidate text)."""
    if not isinstance(source, str):
        return f"the candidate's source is not text ({type(source).__name__})"
    try:
        n = len(source.encode("utf-8"))
    except UnicodeEncodeError as e:
        return f"the candidate's source is not valid Unicode text (a lone surrogate at character {e.start})"
    if n > MAX_SOURCE_BYTES:
        return (f"the candidate's source is {n} bytes, more than the {MAX_SOURCE_BYTES} ({MAX_SOURCE_BYTES >> 10} "
                "KiB) a candidate may have")
    return None


class ProtocolViolation(Exception):
    """A frame from the executor that is not what the protocol allows (the candidate's ``crash``)."""


@dataclasses.dataclass(frozen=True)
class TensorSlot:
    """A tensor's place in lent memory: byte offset, dtype name (``kbenv.sandbox.wire.DTYPES``) and shape."""

    offset: int
    dtype: str
    shape: tuple

    def to_wire(self) -> list:
        return [self.offset, self.dtype, list(self.shape)]


@dataclasses.dataclass(frozen=True)
class Setup:
    """What the executor builds before its first call: the problem (public), the candidate and its device."""

    problem_source: str
    overrides: dict
    candidate_source: str
    device: str
    precision: str
    model_seed: int
    compile: bool = False  # trusted baseline processes only: wrap the model in torch.compile
    deliver: str = "copy"  # outputs: "copy" into the lent places, "ipc" left in place and named, "none" (baselines)
    prebuilt: str = ""  # a tar of this source's extension build in the executor's directory (kbenv.sandbox.builds)

    def to_wire(self) -> dict:
        return {"type": "setup", **dataclasses.asdict(self)}


@dataclasses.dataclass(frozen=True)
class Call:
    """One forward: inputs already written at ``inputs`` (or literal non-tensor values), outputs to ``outputs``."""

    inputs: tuple  # TensorSlot or a literal (int/float/bool/None)
    outputs: tuple  # TensorSlot per expected output

    def to_wire(self) -> dict:
        return {"inputs": [x.to_wire() if isinstance(x, TensorSlot) else {"value": x} for x in self.inputs],
                "outputs": [o.to_wire() for o in self.outputs]}


@dataclasses.dataclass(frozen=True)
class Block:
    """Calls run back to back, in this order (a correctness block and a timed block are the same frames)."""

    calls: tuple  # Call

    def to_wire(self) -> dict:
        return {"type": "block", "calls": [c.to_wire() for c in self.calls]}


@dataclasses.dataclass(frozen=True)
class SetupReply:
    ok: bool
    category: str | None = None
    where: str = ""
    error: str = ""


@dataclasses.dataclass(frozen=True)
class OutputClaim:
    """The executor's account of one output it did not write: a wrong type, dtype or shape (a claim that can
    only fail the candidate). ``None`` claims (the usual case) mean "written": the supervisor then judges the
    lent memory, not the claim."""

    kind: str  # "type", "dtype" or "shape"
    detail: str


@dataclasses.dataclass(frozen=True)
class IpcOutput:
    """Where an output was left in the executor's own memory (``deliver="ipc"``): an allocation's IPC handle and
    the output's byte offset in it. Hostile data like any claim: the supervisor maps the allocation itself,
    checks the range against the driver's size of it, and judges what it reads there after the fence."""

    handle: bytes
    offset: int


@dataclasses.dataclass(frozen=True)
class LentOutput:
    """An output that lies in the lent region itself (a view of an input, say) at this byte offset."""

    offset: int


@dataclasses.dataclass(frozen=True)
class Done:
    """A call's reply: per output, None (written into its lent place), an :class:`IpcOutput` (left in place), a
    :class:`LentOutput` (lying in the lent region) or an :class:`OutputClaim` (not written: fails the
    candidate); or the error the call raised."""

    claims: tuple
    category: str | None = None
    error: str = ""


def _text(v, limit: int = MAX_TEXT) -> str:
    return v[-limit:] if isinstance(v, str) else ""


def parse_setup_reply(frame: dict) -> SetupReply:
    if frame.get("type") != "reply":
        raise ProtocolViolation("the setup reply is not a reply frame")
    if frame.get("ok") is True:
        return SetupReply(True)
    cat = frame.get("category")
    return SetupReply(False, cat if cat in CLAIMABLE else "runtime", _text(frame.get("where"), 100),
                      _text(frame.get("error")))


def parse_dones(frame: dict, n_outputs: list[int]) -> list[Done]:
    """Validate a block's ``dones`` frame against its calls (``n_outputs[i]`` outputs expected of call ``i``): one
    :class:`Done` per call, or fewer when the last of them is the error that ended the block."""
    if frame.get("type") != "dones":
        raise ProtocolViolation(f"expected a dones frame, got {str(frame.get('type'))[:40]!r}")
    entries = frame.get("dones")
    if not isinstance(entries, list) or not 0 < len(entries) <= len(n_outputs):
        raise ProtocolViolation("the dones frame does not hold one reply per call of the block")
    dones = [parse_done(e, n) for e, n in zip(entries, n_outputs)]
    if len(dones) < len(n_outputs) and dones[-1].category is None:
        raise ProtocolViolation(f"the dones frame answers {len(dones)} of the block's {len(n_outputs)} calls, "
                                "and none of them failed")
    if any(d.category is not None for d in dones[:-1]):
        raise ProtocolViolation("the dones frame goes on past a call that failed")
    return dones


def parse_done(entry, n_outputs: int) -> Done:
    """Validate one call's reply (an entry of a ``dones`` frame) against its ``n_outputs`` expected outputs."""
    if not isinstance(entry, dict):
        raise ProtocolViolation("a reply in the dones frame is not a map")
    if "error" in entry:
        cat = entry.get("category")
        return Done((), cat if cat in CLAIMABLE else "runtime", _text(entry.get("error")))
    claims = entry.get("claims")
    if not isinstance(claims, list) or len(claims) > n_outputs + 64:
        raise ProtocolViolation("a reply's claims are not a list of the call's outputs")
    out = []
    for c in claims:
        if c is None:
            out.append(None)
        elif isinstance(c, list) and len(c) == 2 and c[0] in ("type", "dtype", "shape", "count"):
            out.append(OutputClaim(c[0], _text(c[1], 200)))
        elif (isinstance(c, list) and len(c) == 3 and c[0] == "ipc" and isinstance(c[1], bytes) and len(c[1]) == 64
              and type(c[2]) is int and 0 <= c[2] < 1 << 50):
            out.append(IpcOutput(c[1], c[2]))
        elif isinstance(c, list) and len(c) == 2 and c[0] == "lent" and type(c[1]) is int and 0 <= c[1] < 1 << 50:
            out.append(LentOutput(c[1]))
        else:
            raise ProtocolViolation("a claim in a reply is malformed")
    return Done(tuple(out))

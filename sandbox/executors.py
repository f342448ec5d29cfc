"""A running executor with its lent region: setup, calls, and the fence, all on the supervisor's terms.

:class:`Lease` is the supervisor's handle on one executor for one evaluation (or, for a trusted baseline
process, for as long as its problem stays current): the region it lends, the layout of its slots, and the
phase deadline every receive is bounded by. Whatever the executor sends is parsed by ``protocol``; a
violation, a death or a deadline is a :class:`CandidateFault` for a candidate's executor.
"""

from __future__ import annotations

import signal
import subprocess
import time

import torch

from kbenv.sandbox import devshare, protocol, wire
from kbenv.sandbox.lent import LentRegion, SlotLayout
from kbenv.sandbox.process import ExecutorProcess


class CandidateFault(Exception):
    """Something the candidate did: becomes a typed failure of its result."""

    def __init__(self, category: str, reason: str, error: str | None = None):
        super().__init__(reason)
        self.category, self.reason, self.error = category, reason, error


class Deadline:
    """A phase's wall-clock budget, enforced from outside the executor across all of the phase's messages."""

    def __init__(self, phase: str, seconds: float):
        self.phase, self.seconds = phase, float(seconds)
        self.at = time.monotonic() + self.seconds

    def fault(self) -> CandidateFault:
        return CandidateFault("timeout", f"the {self.phase} phase ran past its {self.seconds:.0f} s limit")


COMPARE_CHUNK = 1 << 24  # elements compared at a time: a whole input's mask is a byte per element (2 GiB for 47's)


def changed_elements(got: torch.Tensor, want: torch.Tensor) -> int:
    """How many elements of ``got`` differ from ``want`` (all of them if the shapes differ; NaN equals NaN, so
    a NaN input left as it was is unchanged), compared in chunks: the memory plan counts no temporary the size
    of an input on the supervisor's side (stop 42: 47's 8 GiB input made a 2 GiB mask per comparison)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return got.numel()
    if not (got.is_contiguous() and want.is_contiguous()):
        return int(((got != want) & ~(_nan(got) & _nan(want))).sum())
    a, b = got.reshape(-1), want.reshape(-1)
    n = 0
    for i in range(0, a.numel(), COMPARE_CHUNK):
        ca, cb = a[i:i + COMPARE_CHUNK], b[i:i + COMPARE_CHUNK]
        if not torch.equal(ca, cb):
            n += int(((ca != cb) & ~(_nan(ca) & _nan(cb))).sum())
    return n


def _nan(t: torch.Tensor) -> torch.Tensor:
    return torch.isnan(t) if t.is_floating_point() else torch.zeros_like(t, dtype=torch.bool)


class Lease:
    """``route``: how outputs reach the supervisor (``protocol.Setup.deliver``): copied into lent places on the
    CPU; on cuda left in the executor's memory and read there (a candidate's), or not delivered at all (a
    trusted baseline's: nothing reads them, and no copy lengthens its calls)."""

    def __init__(self, proc: ExecutorProcess, device: torch.device, layout: SlotLayout, region: LentRegion | None = None):
        self.proc, self.device, self.layout = proc, device, layout
        self.route = "copy" if device.type != "cuda" else ("none" if proc.trusted else "ipc")
        self.last: dict[int, protocol.Done] = {}  # each slot's latest reply: where its outputs were left
        self._blocks: dict[tuple, dict] = {}  # the block frames sent, by their slots
        self.imports = None  # devshare.IpcImports, once an output was left in the executor's memory
        self.owns_region = region is None
        self.region = region or LentRegion(device, layout.total_bytes, proc.memfd, seal=not proc.trusted)
        if device.type == "cuda":
            try:
                devshare.send_fd(proc.sock, self.region.dev_buf.fd, b"B", self.region.dev_buf.size)
            except OSError as e:
                raise wire.ChannelClosed(f"executor socket closed: {e}") from e

    # -- messages --------------------------------------------------------------------------------------------
    def _recv(self, deadline: Deadline) -> dict:
        try:
            return self.proc.recv(deadline.at)
        except wire.ChannelTimeout:
            raise deadline.fault() from None
        except wire.ChannelClosed as e:
            raise self.death(deadline.phase, str(e)) from None

    def _send(self, msg: dict, phase: str) -> None:
        try:
            self.proc.send(msg)
        except wire.ChannelClosed as e:
            raise self.death(phase, str(e)) from None

    def setup(self, setup: protocol.Setup, deadline: Deadline) -> None:
        self.send_setup(setup, deadline.phase)
        self.finish_setup(deadline)

    def send_setup(self, setup: protocol.Setup, phase: str) -> None:
        """Send the setup and return at once (the executor builds while the caller does other work)."""
        self._send(setup.to_wire(), phase)

    def finish_setup(self, deadline: Deadline) -> None:
        """The reply to :meth:`send_setup`: raises the candidate's fault if the build failed."""
        try:
            reply = protocol.parse_setup_reply(self._recv(deadline))
        except protocol.ProtocolViolation as e:
            raise CandidateFault("crash", f"protocol violation during {deadline.phase}: {e}") from None
        if not reply.ok:
            raise CandidateFault(reply.category, f"{reply.category} error in {reply.where or deadline.phase}",
                                 reply.error)

    def call(self, k: int, deadline: Deadline) -> protocol.Done:
        """Run slot ``k``'s call alone; the reply is a hint (the caller fences and reads the region)."""
        return self.call_block([k], deadline)[0]

    def call_block(self, ks: list[int], deadline: Deadline) -> list[protocol.Done]:
        """Slots ``ks``' calls as one block: one frame out, the executor runs them back to back (synchronizing
        only after the last, so the GPU sees them queued as a workload would queue them), one frame back. A
        correctness block and a timed block are the same frames. The replies are hints (the caller fences and
        reads the region); the first failure among them is raised."""
        self.send_block(ks, deadline.phase)
        return self.finish_block(ks, deadline)

    def send_block(self, ks: list[int], phase: str) -> None:
        """The first half of :meth:`call_block`: the block sent, its reply not read (a trusted baseline's untimed
        warm-up runs while the supervisor does other work)."""
        frame = self._blocks.get(tuple(ks))
        if frame is None:  # built once per block shape: the timed blocks' clock starts before the send
            slots = [self.layout.slots[k] for k in ks]
            frame = protocol.Block(tuple(protocol.Call(s.inputs, s.outputs) for s in slots)).to_wire()
            self._blocks[tuple(ks)] = frame
        self._send(frame, phase)

    def finish_block(self, ks: list[int], deadline: Deadline) -> list[protocol.Done]:
        """The second half of :meth:`call_block`: the reply to the block :meth:`send_block` sent, one per call."""
        try:
            dones = protocol.parse_dones(self._recv(deadline), [len(self.layout.slots[k].outputs) for k in ks])
        except protocol.ProtocolViolation as e:
            raise CandidateFault("crash", f"protocol violation during {deadline.phase}: {e}") from None
        for k, done in zip(ks, dones):
            if done.category is not None:
                raise CandidateFault(done.category, f"{done.category} error in the forward", done.error)
            self.last[k] = done
        return dones

    # -- region ----------------------------------------------------------------------------------------------
    def write_inputs(self, k: int, inputs: list) -> None:
        for place, x in zip(self.layout.slots[k].inputs, inputs):
            if isinstance(x, torch.Tensor):
                self.region.write(place, x)

    def poison_outputs(self, k: int, byte: int) -> None:
        """Fill slot ``k``'s output places with ``byte``; on cuda, where outputs stay in the executor's memory, the
        memory its previous outputs of this slot occupied (a caching allocator hands it out again, so an output
        the next call leaves partly unwritten shows the poison)."""
        last = self.last.get(k)
        for j, place in enumerate(self.layout.slots[k].outputs):
            if place.offset >= 0:
                self.region.fill(place, byte)
            elif last is not None and j < len(last.claims) and isinstance(last.claims[j], protocol.IpcOutput):
                self._in_place(last.claims[j], place).fill_(byte)

    def read_outputs(self, k: int) -> list:
        """Copies, in the supervisor's own memory, of slot ``k``'s outputs of its latest call (read after the
        fence): from the lent places, or where the executor left them (bounds-checked; a bad place is its crash)."""
        from kbenv.sandbox.lent import view_of
        last = self.last.get(k)
        out = []
        for j, place in enumerate(self.layout.slots[k].outputs):
            if place.offset >= 0:
                out.append(self.region.read(place))
                continue
            claim = last.claims[j] if last is not None and j < len(last.claims) else None
            if isinstance(claim, protocol.IpcOutput):
                out.append(self._in_place(claim, place).clone())
            elif isinstance(claim, protocol.LentOutput):
                try:
                    out.append(view_of(self.region.raw, protocol.TensorSlot(claim.offset, place.dtype, place.shape))
                               .clone())
                except (RuntimeError, ValueError) as e:
                    raise CandidateFault("crash", f"output {j} was placed outside the lent region: {e}") from None
            else:
                raise CandidateFault("crash", f"output {j} was claimed written with no place to write it")
        return out

    def output_meta(self, k: int) -> list[dict]:
        """What the verdict needs to know of slot ``k``'s outputs beyond their values: whether one lies in the
        lent region (a view of an input: ``aliases_input``)."""
        last = self.last.get(k)
        claims = last.claims if last is not None else ()
        return [{"type": "torch.Tensor", "aliases_input": j < len(claims) and isinstance(claims[j], protocol.LentOutput)}
                for j in range(len(self.layout.slots[k].outputs))]

    def _in_place(self, claim, place) -> torch.Tensor:
        """A typed view of an output left in the executor's memory (``claim``: an :class:`protocol.IpcOutput`)."""
        from kbenv.sandbox.lent import nbytes_of
        from kbenv.sandbox.wire import DTYPES
        dtype = DTYPES[place.dtype]
        if claim.offset % torch.empty((), dtype=dtype).element_size():
            raise CandidateFault("crash", "an output was placed at a misaligned offset")
        if self.imports is None:
            self.imports = devshare.IpcImports(self.device)
        try:
            raw = self.imports.view(claim.handle, claim.offset, nbytes_of(dtype, place.shape))
        except devshare.DevShareError as e:
            raise CandidateFault("crash", f"the executor named output memory the supervisor cannot read: {e}") from None
        return raw.view(dtype).reshape(place.shape)

    def inputs_unchanged(self, k: int, inputs: list) -> tuple[bool, str]:
        """The slot's inputs compared whole with the supervisor's own copy (mutation)."""
        from kbenv.sandbox.lent import view_of
        for i, (place, x) in enumerate(zip(self.layout.slots[k].inputs, inputs)):
            if isinstance(x, torch.Tensor):
                got = view_of(self.region.raw, place)
                n = changed_elements(got, x)
                if n:
                    return False, f"input {i}: {n} of {x.numel()} elements changed by the call"
        return True, ""

    # -- end -------------------------------------------------------------------------------------------------
    def death(self, phase: str, why: str) -> CandidateFault:
        p = self.proc
        try:
            code = p.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.signal_kill()
            code = p.proc.returncode
        tail = p.log_tail()
        if code is not None and code < 0:
            sig = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            reason = f"the executor died from {sig} during {phase}"
        elif code is None:  # still running 5 s after its channel failed: killed here
            reason = f"the executor was killed during {phase} ({why})"
        else:
            reason = f"the executor exited with status {code} during {phase} ({why})"
        cat = "oom" if any(s in tail for s in ("out of memory", "MemoryError", "can't allocate memory")) else "crash"
        if "illegal memory access" in tail:
            reason += " (CUDA illegal memory access)"
        return CandidateFault(cat, reason, tail or None)

    def close(self) -> None:
        """Release the region and the mappings of the executor's outputs; only once the process is dead."""
        if self.imports is not None:
            self.imports.close()
            self.imports = None
        if self.owns_region and self.region is not None:
            self.region.close()
        self.region = None

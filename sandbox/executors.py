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


class Lease:
    def __init__(self, proc: ExecutorProcess, device: torch.device, layout: SlotLayout, region: LentRegion | None = None):
        self.proc, self.device, self.layout = proc, device, layout
        self.owns_region = region is None
        self.region = region or LentRegion(device, layout.total_bytes, proc.memfd)
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
        self._send(setup.to_wire(), deadline.phase)
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
        """Every call of a block sent at once (the frames are small: they fit the pipe), then every reply read.
        The executor runs them back to back and synchronizes only once its pipe is empty, so the GPU sees the
        calls queued as a workload would queue them; a correctness block and a timed block are the same frames.
        The replies are hints (the caller fences and reads the region); the first failure among them is raised."""
        for k in ks:
            slot = self.layout.slots[k]
            self._send(protocol.Call(slot.inputs, slot.outputs).to_wire(), deadline.phase)
        dones = []
        for k in ks:
            try:
                done = protocol.parse_done(self._recv(deadline), len(self.layout.slots[k].outputs))
            except protocol.ProtocolViolation as e:
                raise CandidateFault("crash", f"protocol violation during {deadline.phase}: {e}") from None
            if done.category is not None:
                raise CandidateFault(done.category, f"{done.category} error in the forward", done.error)
            dones.append(done)
        return dones

    # -- region ----------------------------------------------------------------------------------------------
    def write_inputs(self, k: int, inputs: list) -> None:
        for place, x in zip(self.layout.slots[k].inputs, inputs):
            if isinstance(x, torch.Tensor):
                self.region.write(place, x)

    def poison_outputs(self, k: int, byte: int) -> None:
        for place in self.layout.slots[k].outputs:
            self.region.fill(place, byte)

    def read_outputs(self, k: int) -> list:
        return [self.region.read(p) for p in self.layout.slots[k].outputs]

    def inputs_unchanged(self, k: int, inputs: list) -> tuple[bool, str]:
        """The slot's inputs compared whole with the supervisor's own copy (mutation)."""
        from kbenv.sandbox.lent import view_of
        for i, (place, x) in enumerate(zip(self.layout.slots[k].inputs, inputs)):
            if isinstance(x, torch.Tensor):
                got = view_of(self.region.raw, place)
                if not torch.equal(got, x):
                    n = int((got != x).sum()) if got.shape == x.shape else got.numel()
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
        else:
            reason = f"the executor exited with status {code} during {phase} ({why})"
        cat = "oom" if any(s in tail for s in ("out of memory", "MemoryError", "can't allocate memory")) else "crash"
        if "illegal memory access" in tail:
            reason += " (CUDA illegal memory access)"
        return CandidateFault(cat, reason, tail or None)

    def close(self) -> None:
        """Release the region; only once the process is dead (its mappings are gone)."""
        if self.owns_region and self.region is not None:
            self.region.close()
        self.region = None

"""kbenv's own errors: one base class, and the split the CLI's exit codes follow.

- :class:`UsageError` (a ``ValueError``): the caller asked for something that cannot be done as asked (an
  unknown flag value, a missing file, a device this machine lacks, a run directory that does not exist). The CLI
  prints its one-line message and exits 2. ``where`` names the flag or file at fault.
- :class:`RunNotFound`: a run directory with no record log (a ``UsageError`` and a ``FileNotFoundError``).
- :class:`PolicyError`: the policy's serving side failed (a model server refused, failed or never answered).
  Not the model's fault and not the harness's: never turned into a low reward. The CLI exits 2 for it (the
  environment is at fault: an unreachable or broken server).

Harness faults (the sandbox's ``HarnessError``, a baseline that cannot be measured) are not here: they raise
their own types, and the CLI exits 1 with the traceback, because an RL run must stop loudly on them.
"""

from __future__ import annotations

__all__ = ["KbenvError", "UsageError", "RunNotFound", "PolicyError"]


class KbenvError(Exception):
    """Base class of the errors kbenv raises on purpose."""


class UsageError(KbenvError, ValueError):
    """A usage or environment mistake; ``str(err)`` is one line that names ``where`` (a flag or a file)."""

    def __init__(self, where: str, message: str):
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class RunNotFound(UsageError, FileNotFoundError):
    """A run directory holds no record log (``records.msgpack``)."""


class PolicyError(KbenvError, RuntimeError):
    """A policy could not produce a reply (the model server refused, failed or never answered).

    This is a fault of the serving side, not a bad answer from the model: callers must not turn it into a low
    reward.

    Attributes:
        status: the HTTP status of the last response, or ``None`` when no response came back (connection error,
            timeout) or the policy is not HTTP-based.
        body: an excerpt of the last response body ("" when there was none).
    """

    def __init__(self, message: str, *, status: int | None = None, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body

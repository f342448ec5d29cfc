"""kbenv's own errors: one base class, and the split the CLI's exit codes follow.

- :class:`UsageError` (a ``ValueError``): the caller asked for something that cannot be done as asked (an
  unknown flag value, a missing file, a device this machine lacks, a run directory that does not exist). The CLI
  prints its one-line message and exits 2. ``where`` names the flag or file at fault.
- :class:`RunNotFound`: a run directory with no record log (a ``UsageError`` and a ``FileNotFoundError``).
- :class:`PolicyFailed`: the policy raised instead of replying (for example its model server refused, failed
  or never answered: ``kbenv.agents.PolicyError``). Not the model's fault and not the harness's: never turned
  into a low reward. The CLI exits 2 for it (the environment is at fault: an unreachable or broken server).

Harness faults (the sandbox's ``HarnessError``, a baseline that cannot be measured) are not here: they raise
their own types, and the CLI exits 1 with the traceback, because an RL run must stop loudly on them.
"""

from __future__ import annotations

__all__ = ["KbenvError", "UsageError", "RunNotFound", "PolicyFailed"]


class KbenvError(Exception):
    """Base class of the errors kbenv raises on purpose."""


class UsageError(KbenvError, ValueError):
    """A usage or environment mistake; ``str(err)`` is one line that names ``where`` (a flag or a file)."""

    def __init__(self, where: str, message: str):
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class RunNotFound(UsageError, FileNotFoundError):
    """A run directory holds no record log (``records.msgpack``)."""


class PolicyFailed(KbenvError, RuntimeError):
    """The policy raised instead of replying (its model server refused, failed or never answered, or the
    policy's own code failed). Raised by the rollout runner from the policy's exception (``__cause__``); the
    CLI exits 2 naming ``--policy``. Not the model's bad answer and not a harness fault: never a reward."""

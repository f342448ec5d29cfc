"""Scripted policies: known-good solutions, known-wrong candidates, and a fixed reply.

Each problem may ship solutions beside it (the layout of gpu-mode/reference-kernels)::

    problems/<set>/solutions/<n>/correct/<name>.py    # must pass the verifier
    problems/<set>/solutions/<n>/wrong/<name>.py      # must be rejected, with the categories its header names

where ``<set>/…/<n>`` is ``kernelbench/…/23`` for ``kernelbench/level1/23`` and ``dlrm/…/1`` for ``dlrm/1``.

Files whose names start with ``_`` are skipped. A wrong candidate states what the verifier must say about it
in full-line comments at column 0, by convention at the top of the file::

    # expect: unwritten|inaccurate
    # expect-cpu: inaccurate
    # gpu-only

- ``# expect: a|b`` (required): categories any one of which is a correct rejection.
- ``# expect-cpu: …`` / ``# expect-cuda: …`` (optional): replace ``expect`` on that device
  (:meth:`KnownBadCase.expected_on`).
- ``# expect-sandbox: …`` (optional): what the sandbox must report; its meaning is owned by the sandbox's tests.
- ``# gpu-only`` (optional flag, may be followed by ``: reason``): the candidate only makes sense on a GPU.
- ``# precision: bf16`` (optional): the precision the candidate is evaluated at (``fp32`` or ``bf16``); without
  it, the problem's default. A precision shortcut is only a shortcut below the precision it is judged at.

Categories are lowercase names separated by ``|`` (docs/result-schema.md lists them), with nothing else on the
line. A missing ``# expect:``, a repeated or unknown ``# expect…:`` directive, or a malformed category raises
:class:`ValueError` naming the file: a mislabelled candidate is a harness bug and must not slip through the
verifier's tests.
"""

from __future__ import annotations

import importlib.resources
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from .base import Observation, Policy

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    SolutionsRoot = str | Path | Traversable | None

_KERNELBENCH_ID = re.compile(r"kernelbench/level1/(\d+)")
_DLRM_ID = re.compile(r"dlrm/(\d+)")
_SETS = ("kernelbench", "dlrm")
_DIRECTIVE = re.compile(r"#\s*(expect(?:[-_][a-z_-]+)?)\s*:(.*)", re.IGNORECASE)
_GPU_ONLY = re.compile(r"#\s*gpu-only(?:[\s:].*)?", re.IGNORECASE)
_PRECISION = re.compile(r"#\s*precision\s*:\s*(\S+)\s*", re.IGNORECASE)
_PRECISIONS = ("fp32", "bf16")
_CATEGORY = re.compile(r"[a-z][a-z0-9_]*")
_EXPECT_KEYS = {
    "expect": "expect",
    "expect-cpu": "expect_cpu",
    "expect-cuda": "expect_cuda",
    "expect-sandbox": "expect_sandbox",
}


class MissingSolutionError(LookupError):
    """The problem has no solution of the kind asked for (or its id maps to no solutions folder)."""


class KnownBadCase(NamedTuple):
    """One wrong candidate and what the verifier must say about it (see the module docstring)."""

    problem_id: str
    name: str
    source: str
    expect: tuple[str, ...]
    expect_cpu: tuple[str, ...] | None
    expect_cuda: tuple[str, ...] | None
    expect_sandbox: tuple[str, ...] | None
    gpu_only: bool
    path: str
    precision: str | None = None

    @property
    def id(self) -> str:
        """A short id for test parametrisation, e.g. ``kernelbench/level1/23:zeros``."""
        return f"{self.problem_id}:{self.name}"

    def expected_on(self, device: str) -> tuple[str, ...]:
        """The categories that count as a correct rejection on ``device`` (``"cpu"`` or ``"cuda"``)."""
        override = {"cpu": self.expect_cpu, "cuda": self.expect_cuda}.get(device)
        return override if override is not None else self.expect


class KnownGoodPolicy(Policy):
    """Reply with the problem's known-good solution in a ```` ```python ```` block.

    When a problem has several files in ``correct/``, the first by file name is used.

    Args:
        solutions_root: the folder holding the problem sets (``<set>/solutions/<n>/correct/*.py``); ``None``
            uses kbenv's installed problems.
    """

    def __init__(self, solutions_root: SolutionsRoot = None) -> None:
        self.root = _problems_root(solutions_root)

    def problems(self) -> list[str]:
        """Ids of the problems that have a known-good solution."""
        return _problem_ids(self.root, "correct")

    def act(self, observation: Observation) -> str:
        problem_id = observation["problem_id"]
        files = _solution_files(self.root, problem_id, "correct")
        if not files:
            raise MissingSolutionError(f"{problem_id} has no known-good solution under {self.root}")
        return python_block(files[0].read_text(encoding="utf-8"))


class KnownBadPolicy(Policy):
    """Reply with one of the problem's known-wrong candidates in a ```` ```python ```` block.

    Args:
        name: the file stem of the candidate to send (e.g. ``"zeros"``); ``None`` cycles through the
            problem's wrong candidates in file-name order, one per :meth:`act`, restarting at :meth:`reset`.
        solutions_root: as for :class:`KnownGoodPolicy`.
    """

    def __init__(self, name: str | None = None, solutions_root: SolutionsRoot = None) -> None:
        self.name = name
        self.root = _problems_root(solutions_root)
        self._next_index: dict[str, int] = {}
        self._lock = threading.Lock()

    def problems(self) -> list[str]:
        """Ids of the problems that have at least one wrong candidate."""
        return _problem_ids(self.root, "wrong")

    def reset(self) -> None:
        with self._lock:
            self._next_index.clear()

    def act(self, observation: Observation) -> str:
        problem_id = observation["problem_id"]
        files = _solution_files(self.root, problem_id, "wrong")
        if not files:
            raise MissingSolutionError(f"{problem_id} has no known-wrong candidate under {self.root}")
        if self.name is not None:
            chosen = [f for f in files if _stem(f) == self.name]
            if not chosen:
                names = ", ".join(_stem(f) for f in files)
                raise MissingSolutionError(f"{problem_id} has no wrong candidate {self.name!r} (it has: {names})")
            return python_block(chosen[0].read_text(encoding="utf-8"))
        with self._lock:
            index = self._next_index.get(problem_id, 0)
            self._next_index[problem_id] = index + 1
        return python_block(files[index % len(files)].read_text(encoding="utf-8"))


class EchoPolicy(Policy):
    """Reply with the same text to every observation, and keep the observations it was shown (for tests)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.observations: list[Observation] = []

    def act(self, observation: Observation) -> str:
        self.observations.append(observation)
        return self.text


def known_bad_suite(solutions_root: SolutionsRoot = None) -> list[KnownBadCase]:
    """Every wrong candidate under the problems root, with its parsed expectations, in problem then name order."""
    root = _problems_root(solutions_root)
    cases = []
    for problem_id in _problem_ids(root, "wrong"):
        for file in _solution_files(root, problem_id, "wrong"):
            source = file.read_text(encoding="utf-8")
            expectations = parse_expectations(source, where=str(file))
            cases.append(KnownBadCase(problem_id, _stem(file), source, **expectations, path=str(file)))
    return cases


def parse_expectations(source: str, where: str = "<source>") -> dict:
    """The ``expect*`` and ``precision`` directives and the ``gpu-only`` flag of a wrong candidate, as
    :class:`KnownBadCase` fields."""
    found: dict[str, tuple[str, ...] | None] = dict.fromkeys(_EXPECT_KEYS.values())
    gpu_only = False
    precision = None
    for line_number, line in enumerate(source.splitlines(), start=1):
        if _GPU_ONLY.fullmatch(line.rstrip()):
            gpu_only = True
            continue
        match = _PRECISION.fullmatch(line.rstrip())
        if match is not None:
            if precision is not None or match[1].lower() not in _PRECISIONS:
                raise ValueError(f"{where}:{line_number}: '# precision:' must be given once, as one of "
                                 f"{', '.join(_PRECISIONS)}; got {match[1]!r}")
            precision = match[1].lower()
            continue
        match = _DIRECTIVE.fullmatch(line.rstrip())
        if match is None:
            continue
        directive, value = match[1].lower(), match[2]
        if directive not in _EXPECT_KEYS:
            known = ", ".join(_EXPECT_KEYS)
            raise ValueError(f"{where}:{line_number}: unknown directive '# {directive}:' (known: {known})")
        key = _EXPECT_KEYS[directive]
        if found[key] is not None:
            raise ValueError(f"{where}:{line_number}: '# {directive}:' given twice")
        categories = tuple(part.strip() for part in value.split("|"))
        bad = [c for c in categories if not _CATEGORY.fullmatch(c)]
        if bad:
            raise ValueError(
                f"{where}:{line_number}: '# {directive}:' wants lowercase categories like 'a|b', got {value.strip()!r}"
            )
        found[key] = categories
    if found["expect"] is None:
        raise ValueError(f"{where}: a wrong candidate must state its categories in a '# expect: a|b' line")
    return {**found, "gpu_only": gpu_only, "precision": precision}


def python_block(source: str) -> str:
    """``source`` as a reply holding one ```` ```python ```` block."""
    if "```" in source:
        raise ValueError("a scripted solution contains ``` and cannot be sent inside a code block")
    return f"```python\n{source.rstrip()}\n```\n"


def _problems_root(solutions_root: SolutionsRoot) -> Traversable:
    if solutions_root is None:
        return importlib.resources.files("kbenv.problems")
    if isinstance(solutions_root, str):
        return Path(solutions_root)
    return solutions_root


def _solutions_folder(problem_id: str) -> tuple[str, str]:
    """(set, folder name) under ``<set>/solutions/`` for a problem id."""
    for set_name, pattern in zip(_SETS, (_KERNELBENCH_ID, _DLRM_ID)):
        match = pattern.fullmatch(problem_id)
        if match:
            return set_name, str(int(match[1]))
    raise MissingSolutionError(
        f"no solutions layout for problem id {problem_id!r} (expected 'kernelbench/level1/<n>' or 'dlrm/<n>')"
    )


def _problem_id(set_name: str, number: int) -> str:
    return f"kernelbench/level1/{number}" if set_name == "kernelbench" else f"{set_name}/{number}"


def _solution_files(root: Traversable, problem_id: str, kind: str) -> list[Traversable]:
    set_name, folder = _solutions_folder(problem_id)
    return sorted(_python_files(root.joinpath(set_name, "solutions", folder, kind)), key=lambda f: f.name)


def _problem_ids(root: Traversable, kind: str) -> list[str]:
    ids = []
    for set_name in _SETS:
        solutions = root.joinpath(set_name, "solutions")
        if not solutions.is_dir():
            continue
        folders = sorted(
            ((int(d.name), d) for d in solutions.iterdir() if d.is_dir() and d.name.isdigit()), key=lambda pair: pair[0]
        )
        ids.extend(_problem_id(set_name, n) for n, d in folders if any(_python_files(d.joinpath(kind))))
    return ids


def _python_files(folder: Traversable) -> Iterator[Traversable]:
    if folder.is_dir():
        for file in folder.iterdir():
            if file.is_file() and file.name.endswith(".py") and not file.name.startswith("_"):
                yield file


def _stem(file: Traversable) -> str:
    return file.name[: -len(".py")]

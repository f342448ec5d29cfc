"""A sandboxed ahead-of-time build of a candidate's C++/CUDA extensions (UNTRUSTED: it runs the candidate's code).

``python -m kbenv.sandbox.builder CANDIDATE.py``, started by :mod:`kbenv.sandbox.builds` in the same sandbox as
an executor but without the GPU: importing the candidate runs its ``load_inline`` (or ``cpp_extension.load``),
which compiles into ``TORCH_EXTENSIONS_DIR``. Exit 0 when the import finished, 1 when it raised (the executor
then meets the same error in its own compile phase, where it is judged).
"""

from __future__ import annotations

import importlib.util
import sys

from kbenv.sandbox.executor import _drop_privileges


def main(argv: list[str]) -> int:
    _drop_privileges()
    spec = importlib.util.spec_from_file_location("candidate", argv[0])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:  # noqa: BLE001 - the candidate's error; its executor reports it
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

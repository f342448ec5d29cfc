"""A sandboxed ahead-of-time build of a candidate's C++/CUDA extensions (UNTRUSTED: it runs the candidate's code).

``python -m kbenv.sandbox.builder CANDIDATE.py OUT.tar``, started by :mod:`kbenv.sandbox.builds` in the same
sandbox as an executor but without the GPU: importing the candidate runs its ``load_inline`` (or
``cpp_extension.load``), which compiles into ``TORCH_EXTENSIONS_DIR`` on the sandbox's bounded /tmp; the build's
files are then packed into ``OUT.tar``, the one host file the sandbox lets it write. Exit 0 when the import
finished and something was packed, 1 otherwise (the executor then compiles, or meets the same error in its own
compile phase, where it is judged).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

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
    from kbenv.sandbox.builds import pack_build
    try:
        packed = pack_build(Path(os.environ["TORCH_EXTENSIONS_DIR"]), Path(argv[1]))
    except OSError:  # the file size limit, or the build's files gone: no build, the executor compiles
        return 1
    return 0 if packed is not None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

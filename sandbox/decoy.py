"""Decoy evidence from the trusted side: the candidate's source with every custom kernel's writes removed.

The supervisor rewrites the source itself (an AST transform): in every function decorated with ``triton.jit``
(or any decorator named ``jit``, ``autotune`` or ``heuristics``) every write is removed: a ``store`` or atomic
statement becomes ``pass``, an atomic used for its value becomes a load of its pointer. The rest of the body
stays, so a kernel that fails to compile still fails (a try/except fallback to torch is still taken). Every
``__global__`` function inside a string constant (CUDA source for ``load_inline``) gets an empty body ``{}``. The rewritten candidate runs in a fresh executor on official inputs; if its output still passes, the
custom kernels do not produce the output (a ``decoy``). A source with no custom kernel at all fails at once.

What this does not catch (documented in the README): a custom kernel that only copies a result torch computed
(the output then depends on the kernel); it earns what torch's own operation earns plus a copy, at most about
the baseline's speed. Kernels hidden from the rewrite (built from ``exec`` of an obfuscated string) are not
neutralised, so their candidate fails as a decoy: hiding a kernel can only hurt.
"""

from __future__ import annotations

import ast
import re

# a signature's parameter list stops at the first ``)`` and never spans a ``;``, ``{`` or ``}`` or more than 4096
# characters: an unclosed ``(`` cannot make each match attempt scan the rest of the text (quadratic in the source)
_GLOBAL = re.compile(r"__global__\s+(?:void|[\w:<>]+)\s+\w+\s*\([^);{}]{0,4096}\)\s*\{")


def _is_kernel_decorator(d: ast.expr) -> bool:
    node = d.func if isinstance(d, ast.Call) else d
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name in ("jit", "autotune", "heuristics") or name.endswith("_jit")


def _noop_cuda(text: str) -> tuple[str, int]:
    """Replace the body of every ``__global__`` function in CUDA source text with ``{}`` (brace-matched)."""
    out, pos, n = [], 0, 0
    for m in _GLOBAL.finditer(text):
        if m.start() < pos:
            continue
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out.append(text[pos:m.end()] + "}")
        pos, n = i, n + 1
    out.append(text[pos:])
    return "".join(out), n


_WRITES = {"store", "atomic_add", "atomic_max", "atomic_min", "atomic_xchg", "atomic_cas", "atomic_and",
           "atomic_or", "atomic_xor", "atomic_sub"}


def _is_write(node) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _WRITES


class _NoWrites(ast.NodeTransformer):
    """Inside a kernel: write statements become ``pass``; a write used for its value reads its pointer."""

    def visit_Expr(self, node: ast.Expr):
        if _is_write(node.value):
            return ast.copy_location(ast.Pass(), node)
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        if _is_write(node) and node.args:
            load = ast.Attribute(value=ast.Name("tl", ast.Load()), attr="load", ctx=ast.Load())
            return ast.copy_location(ast.Call(load, [node.args[0]], []), node)
        return node


class _NoOp(ast.NodeTransformer):
    def __init__(self):
        self.kernels = 0

    def visit_FunctionDef(self, node: ast.FunctionDef):
        if any(_is_kernel_decorator(d) for d in node.decorator_list):
            self.kernels += 1
            node.body = [_NoWrites().visit(stmt) for stmt in node.body]
            return node
        return self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant):
        if isinstance(node.value, str) and "__global__" in node.value:
            text, n = _noop_cuda(node.value)
            self.kernels += n
            return ast.copy_location(ast.Constant(text), node)
        return node


class Unrewritable(Exception):
    """Valid Python that the rewrite cannot process (nested deeper than the parser's or the transformer's
    recursion allows): the decoy check cannot be made, which is the candidate's failure (``decoy``), never a
    fault of the harness."""


def noop_kernels(source: str) -> tuple[str | None, int]:
    """The source with every custom kernel's body emptied, and how many kernels were found (None, 0 when the
    source does not parse: the compile phase reports that). Raises :class:`Unrewritable`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None, 0
    except (RecursionError, MemoryError, ValueError) as e:
        raise Unrewritable(f"the source is nested too deeply to parse ({type(e).__name__})") from e
    t = _NoOp()
    try:
        tree = t.visit(tree)
        ast.fix_missing_locations(tree)
        return ast.unparse(tree), t.kernels
    except (RecursionError, MemoryError, ValueError) as e:
        raise Unrewritable(f"the source is nested too deeply to rewrite ({type(e).__name__})") from e

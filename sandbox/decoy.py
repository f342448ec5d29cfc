"""Decoy evidence from the trusted side: the candidate's source with every custom kernel made a no-op.

The supervisor rewrites the source itself (an AST transform): every function decorated with ``triton.jit`` (or
any decorator whose name ends in ``jit``, ``autotune`` or ``heuristics`` stacked on one) gets an empty body, and
every ``__global__`` function inside a string constant (CUDA source for ``load_inline``) gets an empty body
``{}``. The rewritten candidate runs in a fresh executor on official inputs; if its output still passes, the
custom kernels do not produce the output (a ``decoy``). A source with no custom kernel at all fails at once.

What this does not catch (documented in the README): a custom kernel that only copies a result torch computed
(the output then depends on the kernel); it earns what torch's own operation earns plus a copy, at most about
the baseline's speed. Kernels hidden from the rewrite (built from ``exec`` of an obfuscated string) are not
neutralised, so their candidate fails as a decoy: hiding a kernel can only hurt.
"""

from __future__ import annotations

import ast
import re

_GLOBAL = re.compile(r"__global__\s+(?:void|[\w:<>]+)\s+\w+\s*\([^)]*\)\s*\{")


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


class _NoOp(ast.NodeTransformer):
    def __init__(self):
        self.kernels = 0

    def visit_FunctionDef(self, node: ast.FunctionDef):
        if any(_is_kernel_decorator(d) for d in node.decorator_list):
            self.kernels += 1
            node.body = [ast.Pass()]
            return node
        return self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant):
        if isinstance(node.value, str) and "__global__" in node.value:
            text, n = _noop_cuda(node.value)
            self.kernels += n
            return ast.copy_location(ast.Constant(text), node)
        return node


def noop_kernels(source: str) -> tuple[str | None, int]:
    """The source with every custom kernel's body emptied, and how many kernels were found (None, 0 when the
    source does not parse: the compile phase reports that)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None, 0
    t = _NoOp()
    tree = t.visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree), t.kernels

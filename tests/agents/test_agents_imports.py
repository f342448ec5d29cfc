"""agents/ stays light and inside its folder rules (ARCHITECTURE.md)."""

from __future__ import annotations

import ast
import importlib.resources

import pytest

HEAVY = {"torch", "transformers", "triton", "ray"}
AGENT_MODULES = sorted(
    f.name for f in importlib.resources.files("kbenv.agents").iterdir() if f.name.endswith(".py")
)


def module_level_imports(source: str) -> list[str]:
    """Top-level module names imported outside any function or class body."""
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module or "")
    return names


def test_all_modules_are_checked():
    assert {"__init__.py", "base.py", "openai_chat.py", "hf_local.py", "scripted.py"} <= set(AGENT_MODULES)


@pytest.mark.parametrize("module", AGENT_MODULES)
def test_no_heavy_or_upward_import_at_module_level(module):
    source = importlib.resources.files("kbenv.agents").joinpath(module).read_text(encoding="utf-8")
    for name in module_level_imports(source):
        root = name.split(".")[0]
        assert root not in HEAVY, f"{module} imports {name} at module level"
        # agents/ may use kbenv's public API only; today it needs nothing from it beyond package data.
        assert root != "kbenv", f"{module} imports {name}"

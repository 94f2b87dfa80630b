"""Commands stay thin: no command module imports another, no function in commands/ reaches 60 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

COMMANDS = sorted((Path(__file__).resolve().parents[3] / "omni_deploy" / "cli" / "commands").glob("*.py"))


@pytest.mark.parametrize("path", COMMANDS, ids=[p.name for p in COMMANDS])
def test_command_module_is_thin(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            assert not node.module.startswith("omni_deploy.cli.commands"), (
                f"{path.name} imports {node.module}"
            )
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("omni_deploy.cli.commands") for a in node.names), path.name
        if isinstance(node, ast.FunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            assert length < 60, f"{path.name}:{node.lineno} {node.name} is {length} lines"


def test_serve_bench_resolve_load_through_deployment() -> None:
    # Only serve uses validate, to check the file before it launches; nobody loads through it.
    package = Path(__file__).resolve().parents[3] / "omni_deploy"
    for folder in ("serve", "bench", "speaker_backend", "explain"):
        for path in (package / folder).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "omni_deploy.validate"
                ):
                    assert folder == "serve", f"{folder}/{path.name} imports {node.module}"
                    assert "Context" not in {a.name for a in node.names}, path

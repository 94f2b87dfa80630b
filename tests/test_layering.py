"""Imports run one way: each part of the package imports only parts on a lower layer (or itself).

The layers, top first (README "Layout"): the CLI edge; bench (which starts servers through
serve); serve, k8s and explain; the launch spec; validate and resolve; topology, the Deployment, the
host snapshot and the server check's process edge; knowledge; config; and the vocabulary and tools everything may use. Read from
the source by AST (imports inside functions count too); nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "omni_deploy"
# (layer, parts): a part may import its own group and lower layers; groups on one layer stay apart.
GROUPS: list[tuple[int, tuple[str, ...]]] = [
    (10, ("commands", "cli", "cli_inputs", "cli_params", "cli_reference", "cli_settings", "cli_fix", "inputs",
          "project", "__main__")),
    (9, ("bench",)),
    (8, ("serve",)), (8, ("k8s",)), (8, ("explain",)),
    (7, ("launch",)),
    (6, ("validate",)), (6, ("resolve",)),
    (5, ("topology",)), (5, ("deployment",)), (5, ("host",)), (5, ("server_check",)),
    (4, ("knowledge",)),
    (3, ("config",)),
    (2, ("integrations",)),
    (1, ("errors", "bundled", "redact", "install_hint", "output", "jsonpath")),
    (1, ("speaker",)),
    (0, ("codes", "speaker_rules", "defaults", "guarded", "safe_write", "numbers", "patterns", "children")),
]  # fmt: skip
LAYERS = {part: layer for layer, parts in GROUPS for part in parts}
GROUP_OF = {part: parts for _, parts in GROUPS for part in parts}


def _part(module: str) -> str:
    """`omni_deploy.serve.prepare` -> `serve`; `omni_deploy.host` -> `host`."""
    return module.split(".")[1]


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("omni_deploy."):
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("omni_deploy.")]
    return found


SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


def test_every_part_has_a_layer() -> None:
    parts = {(p.relative_to(PACKAGE).parts[0]).removesuffix(".py") for p in SOURCES}
    assert parts <= set(LAYERS), sorted(parts - set(LAYERS))


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(PACKAGE)) for p in SOURCES])
def test_no_import_runs_up_or_sideways(path: Path) -> None:
    here = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
    for line, module in _imports(path):
        there = _part(module)
        assert there in GROUP_OF[here] or LAYERS[there] < LAYERS[here], (
            f"{path.relative_to(PACKAGE)}:{line} imports {module}: {here} (layer {LAYERS[here]}) "
            f"may import only lower layers, not {there} (layer {LAYERS[there]})"
        )

"""Imports run one way: each part of the package imports only parts on a lower layer (or itself).

The layers, top first (README "Layout"): the CLI edge; bench (which starts servers through
serve); serve, k8s and explain; the launch spec; validate and the speaker-backend decision; the
Deployment and its topology; knowledge; config; integrations (the vLLM plugin and the speaker rules
it applies); the speaker encoder; and the vocabulary and safe I/O everything may use (common). Read
from the source by AST (imports inside functions count too, and `from omni_deploy.x import y`
counts as importing `x.y`); nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "omni_deploy"
# (layer, parts): a part may import its own group and lower layers; groups on one layer stay apart.
GROUPS: list[tuple[int, tuple[str, ...]]] = [
    (10, ("cli", "__main__")),
    (9, ("bench",)),
    (8, ("serve",)), (8, ("k8s",)), (8, ("explain",)),
    (7, ("launch",)),
    (6, ("validate",)), (6, ("speaker_backend",)),
    (5, ("deployment",)),
    (4, ("knowledge",)),
    (3, ("config",)),
    (2, ("integrations",)),
    (1, ("speaker",)),
    (0, ("common",)),
]  # fmt: skip
LAYERS = {part: layer for layer, parts in GROUPS for part in parts}
GROUP_OF = {part: parts for _, parts in GROUPS for part in parts}


def _part(module: str) -> str:
    """`omni_deploy.serve.prepare` -> `serve`; `omni_deploy.common.codes` -> `common`."""
    return module.split(".")[1]


def _is_module(dotted: str) -> bool:
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for each import of the package; `from omni_deploy[.x] import y` names `x.y`
    where y is a module (`from omni_deploy import __version__` names the package's root)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "omni_deploy":
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.append((node.lineno, full if _is_module(full) else node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("omni_deploy.")]
    return found


SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


def _here(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def test_every_part_has_a_layer() -> None:
    parts = {_here(p) for p in SOURCES}
    assert parts <= set(LAYERS), sorted(parts - set(LAYERS))


def test_the_root_imports_nothing_of_the_package() -> None:
    # Imports of the root itself (`from omni_deploy import __version__`) are allowed everywhere.
    assert _imports(PACKAGE / "__init__.py") == []


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(PACKAGE)) for p in SOURCES])
def test_no_import_runs_up_or_sideways(path: Path) -> None:
    here = _here(path)
    for line, module in _imports(path):
        if module == "omni_deploy":
            continue
        there = _part(module)
        assert there in GROUP_OF[here] or LAYERS[there] < LAYERS[here], (
            f"{path.relative_to(PACKAGE)}:{line} imports {module}: {here} (layer {LAYERS[here]}) "
            f"may import only lower layers, not {there} (layer {LAYERS[there]})"
        )

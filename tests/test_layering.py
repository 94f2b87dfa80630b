"""Imports run one way: each part of the package imports only itself and parts on lower layers.

The layers, top first (README "Layout"): the entry point; the CLI edge; bench (which starts servers
through serve); the use cases serve, k8s and explain; the launch spec; validate and the
speaker-backend decision; the Deployment and its topology; knowledge; config; integrations (the
vLLM plugin and the speaker rules it applies); the speaker encoder; and the vocabulary and safe I/O
everything may use (common). Parts that share a layer stay apart. Read from the source by AST
(imports inside functions count too; `from omni_deploy.x import y` and `from omni_deploy import x`
count as importing `x.y` and `x`, relative imports as what they name, and a string naming a module
of the package, as importlib.import_module and the command table take it, as importing it);
nothing is imported.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "omni_deploy"
# Top first; a part may import itself and the parts of the layers below its own, never a part of
# its own layer.
LAYERS: list[tuple[str, ...]] = [
    ("__main__",),
    ("cli",),
    ("bench",),
    ("serve", "k8s", "explain"),
    ("launch",),
    ("validate", "speaker_backend"),
    ("deployment",),
    ("knowledge",),
    ("config",),
    ("integrations",),
    ("speaker",),
    ("common",),
]
LAYER_OF = {part: len(LAYERS) - i for i, parts in enumerate(LAYERS) for part in parts}


def _part(module: str) -> str:
    """`omni_deploy.serve.prepare` -> `serve`; `omni_deploy.common.codes` -> `common`."""
    return module.split(".")[1]


def _allowed(here: str, there: str) -> bool:
    return there == here or LAYER_OF[there] < LAYER_OF[here]


def _is_module(dotted: str, root: Path = PACKAGE.parent) -> bool:
    path = root.joinpath(*dotted.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def _absolute(node: ast.ImportFrom, module: str) -> str | None:
    """The module a `from` import reads from, relative imports resolved against `module`."""
    if not node.level:
        return node.module
    base = module.split(".")[: -node.level]
    return ".".join([*base, node.module] if node.module else base) or None


def _imports(path: Path, root: Path = PACKAGE.parent) -> list[tuple[int, str]]:
    """(line, module) for each import of the package; `from omni_deploy[.x] import y` names `x.y`
    where y is a module (`from omni_deploy import __version__` names the package's root)."""
    here = ".".join(path.relative_to(root).with_suffix("").parts)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            module = _absolute(node, here)
            if module is None or module.split(".")[0] != "omni_deploy":
                continue
            for alias in node.names:
                full = f"{module}.{alias.name}"
                found.append((node.lineno, full if _is_module(full, root) else module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("omni_deploy.")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and DOTTED.fullmatch(node.value):
            named = _longest_module(node.value.partition(":")[0], root)
            if named is not None:
                found.append((node.lineno, named))
    return found


# A string that names a module of the package (`omni_deploy.x.y`, `omni_deploy.x.y:attr`, or a
# class's dotted path): what importlib.import_module or an entry point table loads by name.
DOTTED = re.compile(r"omni_deploy(\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?")


def _longest_module(dotted: str, root: Path) -> str | None:
    parts = dotted.split(".")
    for end in range(len(parts), 1, -1):
        if _is_module(".".join(parts[:end]), root):
            return ".".join(parts[:end])
    return None


SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


def _here(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def test_every_part_has_a_layer() -> None:
    parts = {_here(p) for p in SOURCES}
    assert parts <= set(LAYER_OF), sorted(parts - set(LAYER_OF))


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
        assert _allowed(here, there), (
            f"{path.relative_to(PACKAGE)}:{line} imports {module}: {here} (layer {LAYER_OF[here]}) "
            f"may import only itself and lower layers, not {there} (layer {LAYER_OF[there]})"
        )


def test_at_most_twelve_layers_state_the_architecture() -> None:
    assert len(LAYERS) <= 12
    assert len(LAYER_OF) == sum(len(parts) for parts in LAYERS)  # each part on one layer


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from omni_deploy import serve", "omni_deploy.serve"),
        ("from omni_deploy.serve import prepare", "omni_deploy.serve.prepare"),
        ("from omni_deploy.serve.prepare import prepare", "omni_deploy.serve.prepare"),
        ("import omni_deploy.serve.prepare", "omni_deploy.serve.prepare"),
        ("from .. import serve", "omni_deploy.serve"),
        ("from ..serve.prepare import prepare", "omni_deploy.serve.prepare"),
        ("from . import spec", "omni_deploy.launch.spec"),
        ("def f():\n    from omni_deploy import serve", "omni_deploy.serve"),
        ("from omni_deploy import __version__", "omni_deploy"),
        ('importlib.import_module("omni_deploy.serve.prepare")', "omni_deploy.serve.prepare"),
        ('PATCH = "omni_deploy.serve.prepare:prepare"', "omni_deploy.serve.prepare"),
        ('ERROR = "omni_deploy.serve.prepare.Refused"', "omni_deploy.serve.prepare"),
    ],
)
def test_every_form_of_import_is_read(tmp_path: Path, source: str, expected: str) -> None:
    """The reader itself: each way of writing an import of the package names the module it reads."""
    for part, module in (("serve", "prepare"), ("launch", "spec")):
        (tmp_path / "omni_deploy" / part).mkdir(parents=True, exist_ok=True)
        (tmp_path / "omni_deploy" / part / f"{module}.py").write_text("", encoding="utf-8")
    path = tmp_path / "omni_deploy" / "launch" / "plan.py"
    path.write_text(source + "\n", encoding="utf-8")
    assert [module for _, module in _imports(path, tmp_path)] == [expected]


@pytest.mark.parametrize(
    ("here", "there", "allowed"),
    [
        ("serve", "serve", True),
        ("serve", "launch", True),
        ("serve", "k8s", False),  # same layer: apart
        ("launch", "serve", False),  # up
        ("validate", "speaker_backend", False),
        ("config", "knowledge", False),  # config imports nothing from knowledge
        ("deployment", "config", True),
        ("common", "speaker", False),
        ("__main__", "cli", True),
    ],
)
def test_the_rule(here: str, there: str, allowed: bool) -> None:
    assert _allowed(here, there) is allowed


def test_a_packages_init_reads_relative_imports_from_its_own_package(tmp_path: Path) -> None:
    (tmp_path / "omni_deploy" / "launch").mkdir(parents=True)
    (tmp_path / "omni_deploy" / "launch" / "spec.py").write_text("", encoding="utf-8")
    init = tmp_path / "omni_deploy" / "launch" / "__init__.py"
    init.write_text("from . import spec\nfrom .spec import x\n", encoding="utf-8")
    assert [module for _, module in _imports(init, tmp_path)] == ["omni_deploy.launch.spec"] * 2

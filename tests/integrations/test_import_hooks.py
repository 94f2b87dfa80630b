"""integrations.import_hooks: a patch runs when its module is imported, once, and never breaks it."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from omni_deploy.integrations import import_hooks


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh importable package `hookpkg_<n>` with a module `target` (and a fresh hook table)."""
    name = f"hookpkg_{abs(hash(tmp_path)) % 10**8}"
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "target.py").write_text(
        textwrap.dedent("""
        VALUE = 1

        def answer():
            return VALUE
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(import_hooks, "_hooks", {})
    yield name
    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[module]


def test_a_patch_runs_when_the_module_is_imported_not_before(package: str) -> None:
    seen: list[ModuleType] = []
    import_hooks.when_imported(f"{package}.target", "p", seen.append)
    assert seen == [] and f"{package}.target" not in sys.modules
    module = __import__(f"{package}.target", fromlist=["x"])
    assert seen == [module] and import_hooks.applied(module) == ("p",)
    assert module.__loader__.__class__.__name__ != "_PatchingLoader"  # the module sees its own loader
    import inspect

    assert "def answer" in inspect.getsource(module.answer)


def test_an_imported_module_is_patched_at_once_and_only_once(package: str) -> None:
    module = __import__(f"{package}.target", fromlist=["x"])
    calls: list[str] = []
    assert import_hooks.when_imported(f"{package}.target", "p", lambda m: calls.append("p"))
    assert not import_hooks.when_imported(f"{package}.target", "p", lambda m: calls.append("again"))
    assert calls == ["p"] and import_hooks.applied(module) == ("p",)


def test_two_patches_of_one_module_run_in_order(package: str) -> None:
    order: list[str] = []

    def first(module: ModuleType) -> None:
        order.append("speaker")
        module.VALUE = 2

    def second(module: ModuleType) -> None:
        order.append(f"batched saw {module.answer()}")

    import_hooks.when_imported(f"{package}.target", "speaker", first)
    import_hooks.when_imported(f"{package}.target", "batched", second)
    module = __import__(f"{package}.target", fromlist=["x"])
    assert order == ["speaker", "batched saw 2"] and module.answer() == 2


def test_a_failing_patch_is_reported_and_the_import_goes_on(
    package: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    errors: list[str] = []
    monkeypatch.setattr(import_hooks, "_on_error", [lambda hook, exc: errors.append(f"{hook.name}: {exc}")])

    def broken(module: ModuleType) -> None:
        raise RuntimeError("shape changed")

    import_hooks.when_imported(f"{package}.target", "broken", broken)
    import_hooks.when_imported(f"{package}.target", "fine", lambda m: setattr(m, "VALUE", 3))
    module = __import__(f"{package}.target", fromlist=["x"])
    assert errors == ["broken: shape changed"] and module.answer() == 3


def test_a_module_that_does_not_exist_is_left_to_the_other_finders(package: str) -> None:
    import_hooks.when_imported(f"{package}.missing", "p", lambda m: None)
    with pytest.raises(ModuleNotFoundError):
        __import__(f"{package}.missing")

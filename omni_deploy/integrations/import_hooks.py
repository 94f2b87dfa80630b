"""One place that says "when module X is imported, apply patch P".

vLLM calls general plugins in every process it starts (API server, each stage's engine core,
workers), but a patch is wanted only where its target module is imported: the MiniCPM-o Code2Wav
module exists in the Code2Wav stage's process alone. Importing the target in `register()` would
cost every process the target's imports (torch, onnxruntime, s3tokenizer, ...). Instead
`when_imported` records the patch and a `sys.meta_path` finder runs it right after the target
module has executed, in whatever process imports it; a module already imported is patched at once.

Each patch runs once per module object, under the import lock of that module, and never breaks
the import: an exception in a patch is logged (`on_error`) and the module stays as vllm-omni
wrote it. Several patches may hook one module (issue 26's batched reference preparation hooks the
same Code2Wav module as the speaker encoder); they run in the order they were registered.

Standard library only: this module is imported in every vLLM process.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

Patch = Callable[[ModuleType], None]
_APPLIED = "__omni_deploy_patches__"  # set on a patched module: names of the patches it got


@dataclass(frozen=True)
class Hook:
    module: str
    name: str  # says in logs and in the module's record which patch ran
    patch: Patch


_hooks: dict[str, list[Hook]] = {}
_lock = threading.RLock()
_on_error: list[Callable[[Hook, BaseException], None]] = []


def on_error(callback: Callable[[Hook, BaseException], None]) -> None:
    """Where a failing patch is reported (the plugin logs it through vLLM's logger)."""
    with _lock:
        if callback not in _on_error:
            _on_error.append(callback)


def when_imported(module: str, name: str, patch: Patch) -> bool:
    """Apply `patch(module)` once the module `module` is imported in this process (now, if it is
    already). A second registration under the same (module, name) is ignored; returns whether
    this one was recorded."""
    with _lock:
        hooks = _hooks.setdefault(module, [])
        if any(h.name == name for h in hooks):
            return False
        hook = Hook(module, name, patch)
        hooks.append(hook)
        _install_finder()
        loaded = sys.modules.get(module)
    spec = getattr(loaded, "__spec__", None)
    # A module still executing (imported before the finder was in place, now in a circular import)
    # is left alone: patching half a module would be worse than not patching it.
    if loaded is not None and spec is not None and not getattr(spec, "_initializing", False):
        _apply(loaded, [hook])
    return True


def registered(module: str | None = None) -> list[Hook]:
    with _lock:
        if module is not None:
            return list(_hooks.get(module, ()))
        return [h for hooks in _hooks.values() for h in hooks]


def applied(module: ModuleType) -> tuple[str, ...]:
    """The names of the patches a module got."""
    return tuple(getattr(module, _APPLIED, ()))


def _apply(module: ModuleType, hooks: Sequence[Hook]) -> None:
    for hook in hooks:
        with _lock:
            done: list[str] = module.__dict__.setdefault(_APPLIED, [])
            if hook.name in done:
                continue
            done.append(hook.name)
        try:
            hook.patch(module)
        except Exception as exc:  # a patch never breaks the import it hooks
            for callback in list(_on_error):
                with contextlib.suppress(Exception):
                    callback(hook, exc)


class _PatchingLoader(importlib.abc.Loader):
    """Runs the real loader, puts it back on the module, then applies the module's hooks."""

    def __init__(self, inner: importlib.abc.Loader, name: str) -> None:
        self.inner = inner
        self.name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # The module sees its own loader (inspect, linecache, importlib.resources read it).
        module.__loader__ = self.inner
        if module.__spec__ is not None:
            module.__spec__.loader = self.inner
        self.inner.exec_module(module)
        _apply(module, registered(self.name))

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.inner, attribute)


class _Finder(importlib.abc.MetaPathFinder):
    """Asks the other finders for a hooked module's spec and wraps its loader."""

    def __init__(self) -> None:
        self._busy = threading.local()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _hooks or getattr(self._busy, "name", None) == fullname:
            return None
        self._busy.name = fullname
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._busy.name = None
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PatchingLoader(spec.loader, fullname)
        return spec


_finder: _Finder | None = None


def _install_finder() -> None:
    global _finder
    if _finder is None:
        _finder = _Finder()
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)

"""Install hints name something pip can install: this checkout with the extra, never the index."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_deploy.common import install_hint as hint_module
from omni_deploy.common.install_hint import install_hint

ROOT = Path(__file__).resolve().parents[2]


def test_from_a_checkout_the_hint_names_it() -> None:
    assert install_hint("speaker") == f"pip install '{ROOT}[speaker]'"


def test_without_a_checkout_the_hint_lists_the_requirements(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(hint_module, "_CHECKOUT", tmp_path)
    monkeypatch.setattr(hint_module, "_requirements", lambda extra: ["torch>=2.4", "onnx>=1.15"])
    assert install_hint("speaker") == "pip install 'torch>=2.4' 'onnx>=1.15'"

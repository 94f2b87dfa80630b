from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def standin_onnx() -> Path:
    """A stand-in campplus.onnx (real structure, random weights), exported once into the cache."""
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    from omni_deploy.speaker.standin import export_standin
    from tests.support.upstream import CACHE

    path = CACHE / "campplus-standin-seed0.onnx"
    if not path.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        export_standin(path, seed=0)
    return path

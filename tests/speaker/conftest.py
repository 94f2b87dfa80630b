from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.upstream import CACHE

pytest.importorskip("torch")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


@pytest.fixture(scope="session")
def standin_onnx() -> Path:
    """A stand-in campplus.onnx (real structure, random weights), exported once into the cache."""
    from omni_deploy.speaker.standin import export_standin

    path = CACHE / "campplus-standin-seed0.onnx"
    if not path.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        export_standin(path, seed=0)
    return path


@pytest.fixture(scope="session")
def ort(standin_onnx: Path):  # type: ignore[no-untyped-def]
    from omni_deploy.speaker.parity import ort_session

    return ort_session(str(standin_onnx))

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


@pytest.fixture(scope="session")
def ort(standin_onnx: Path):  # type: ignore[no-untyped-def]
    from omni_deploy.speaker.parity import ort_session

    return ort_session(str(standin_onnx))

"""The CUDA kernels, run on the CPU through Triton's interpreter and checked against torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
ROOT = Path(__file__).resolve().parents[2]


def test_kernels_match_their_torch_definitions() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "speaker" / "triton_check.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "triton kernels match torch" in done.stdout


def test_cpu_default_is_the_torch_path() -> None:
    import torch

    from omni_deploy.speaker.fused_model import default_backend

    assert default_backend(torch.device("cpu")) == "torch"

"""The CUDA kernels, run on the CPU through Triton's interpreter and checked against torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
ROOT = Path(__file__).resolve().parents[2]


def _interpreted(script: str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run a check script of this folder under Triton's CPU interpreter; its stdout if it passed."""
    full_env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT), **(env or {})}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "speaker" / script), *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_kernels_match_their_torch_definitions() -> None:
    assert "triton kernels match torch" in _interpreted("triton_check.py")


def test_the_triton_forward_matches_the_torch_forward(standin_onnx: Path) -> None:
    # Wide tiles keep the interpreter to seconds; they still cross CAM segment boundaries
    # (64-frame tiles over 100-frame segments), which the kernel check covers at the tuned tiles.
    tiles = '{"bottleneck_small": {"BLOCK_M": 128, "BLOCK_T": 64, "BLOCK_K": 128}, "local_small": {"BLOCK_T": 64}}'
    out = _interpreted("triton_model_check.py", str(standin_onnx), env={"OMNI_DEPLOY_SPK_TILES": tiles})
    assert "triton model matches torch" in out


def test_cpu_default_is_the_torch_path() -> None:
    import torch

    from omni_deploy.speaker.fused_model import default_backend

    assert default_backend(torch.device("cpu")) == "torch"

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


def test_a_launch_with_the_wrong_inputs_is_refused_before_it_runs() -> None:
    """Each kernel checks dtype, device, shape and contiguity in Python and raises KernelInputError
    (a ValueError the guard answers) rather than reading or writing out of bounds: issue 29's
    bf16 buffer read as float32 was an illegal memory access on an H200."""
    import torch

    from omni_deploy.speaker import triton_kernels as tk

    f32 = {"dtype": torch.float32, "device": "cpu"}
    x = torch.zeros(2, 64, 200, **f32)
    scale, shift = torch.ones(64, **f32), torch.zeros(64, **f32)
    weight, out = torch.zeros(128, 64, **f32), torch.zeros(2, 128, 200, **f32)
    with pytest.raises(tk.KernelInputError, match="x has dtype bfloat16"):
        tk.bottleneck(x.to(torch.bfloat16), scale, shift, weight, None, out)
    with pytest.raises(tk.KernelInputError, match="weight has shape"):
        tk.bottleneck(x, scale, shift, weight[:, :32], None, out)
    with pytest.raises(tk.KernelInputError, match="out has shape"):
        tk.bottleneck(x, scale, shift, weight, None, out[:, :, :100])
    with pytest.raises(tk.KernelInputError, match="weight is not contiguous"):
        tk.bottleneck(x, scale, shift, torch.zeros(64, 128, **f32).t(), None, out)
    packed, lengths = torch.zeros(300, 80, **f32), torch.tensor([200, 100], dtype=torch.int64)
    with pytest.raises(tk.KernelInputError, match="starts has dtype int32"):
        tk.prepare(packed, lengths, lengths.to(torch.int32), 200)
    with pytest.raises(tk.KernelInputError, match="feats has dtype bfloat16"):
        tk.prepare(packed.to(torch.bfloat16), lengths, torch.tensor([0, 200]), 200)
    with pytest.raises(tk.KernelInputError, match="lengths has dtype float32"):
        tk.stats_pool(x, lengths.float())
    with pytest.raises(tk.KernelInputError, match="mask has shape"):
        tk.bias_relu_mask(x.clone(), scale, torch.ones(2, 100, **f32))
    assert issubclass(tk.KernelInputError, ValueError)

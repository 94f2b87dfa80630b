"""docker/check_image.py, the serving image's build-time check, run in the vllm tiers: the real vllm
and vllm-omni of the tier (0.30.0 and 0.30.0, or 0.32.0 and 0.32.0rc1) with omni-deploy installed
beside them, as in the image; the pins given are the tier's own releases."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm_omni")  # the vllm tier (.ci/run); the main tier has neither vllm nor vllm-omni
pytestmark = pytest.mark.vllm
ROOT = Path(__file__).resolve().parents[2]
VLLM, VLLM_OMNI = importlib.metadata.version("vllm"), importlib.metadata.version("vllm-omni")


def _check(*pins: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "docker" / "check_image.py"), *pins],
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_the_image_check_passes_with_the_pinned_releases_and_the_plugin() -> None:
    done = _check("--vllm", VLLM, "--vllm-omni", VLLM_OMNI)
    assert done.returncode == 0, done.stderr
    assert "plugin omni_deploy_campplus registered and importable" in done.stdout


def test_the_image_check_stops_a_build_on_another_release() -> None:
    done = _check("--vllm", VLLM, "--vllm-omni", "0.29.0")
    assert done.returncode == 1
    assert f"vllm-omni {VLLM_OMNI} is installed; the image pins 0.29.0" in done.stderr
    assert done.stderr.count("the image pins") == 1  # vllm itself matches its pin

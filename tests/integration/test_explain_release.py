"""explain with the tier's vllm-omni installed and no --target-version: it describes that release,
as its own code (imported here, in the vllm tier) does."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm_omni")
pytest.importorskip("vllm")

from tests.support.cli import run_cli

pytestmark = pytest.mark.vllm
VERSION = importlib.metadata.version("vllm-omni")
ROOT = Path(__file__).resolve().parents[2]
TURN = str(ROOT / "deploy" / "minicpmo_4_5_turn.yaml")
CODE2WAV = "vllm_omni.model_executor.models.minicpmo_4_5.minicpmo_4_5_code2wav"


def _explain(capsys: pytest.CaptureFixture[str], platform: str, *args: str) -> dict:  # type: ignore[type-arg]
    result = run_cli(capsys, "explain", TURN, "--backend", "--platform", platform, *args, "-o", "json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["target_version"] == VERSION
    return data["platforms"][platform]  # type: ignore[no-any-return]


def _line(at: str) -> str:
    rel, _, number = at.rpartition(":")
    package = Path(sys.modules["vllm_omni"].__file__).parents[1]  # type: ignore[arg-type]
    return (package / rel).read_text(encoding="utf-8").splitlines()[int(number) - 1]


def test_npu_backend_is_the_installed_releases(capsys: pytest.CaptureFixture[str]) -> None:
    npu = _explain(capsys, "npu")
    source = importlib.util.find_spec(CODE2WAV).origin  # type: ignore[union-attr]
    calls_device_spk = "token2wav.enable_device_spk_embedding()" in Path(source).read_text(encoding="utf-8")
    assert npu["speaker_backend"] == ("npu-torch" if calls_device_spk else "cpu-onnxruntime")
    own = {b["topic"]: b for b in npu["vllm_omni_own"]}
    if calls_device_spk:  # 0.32.0rc1
        assert "enable_device_spk_embedding()" in _line(own["campplus"]["at"])


def test_tf32_is_what_the_installed_code_computes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.32.0rc1: its own _tf32_mode on the file's extra and the environment; older: no such policy."""
    module = importlib.import_module(CODE2WAV)
    for env in ({}, {"MINICPMO_CODE2WAV_TF32": "0"}, {"MINICPMO_CODE2WAV_TF32": "tf32"}):
        monkeypatch.delenv("MINICPMO_CODE2WAV_TF32", raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        tf32 = {b["topic"]: b for b in _explain(capsys, "cuda")["vllm_omni_own"]}["tf32"]
        if hasattr(module, "_tf32_mode"):
            from omni_deploy.config.nodes import to_plain
            from omni_deploy.deployment.model import Deployment

            extra = to_plain(Deployment.load(TURN).code2wav_extra())
            assert tf32["value"] is (module._tf32_mode(extra) != "off"), env
            assert "token2wav_allow_tf32" in _line(tf32["at"])
        else:
            assert tf32["value"] is False


def test_probe_names_the_layout_the_plugin_would_work_on(capsys: pytest.CaptureFixture[str]) -> None:
    """explain --probe reads the installed release's code as the plugin's admission does: the layout
    it names per model is the one recognised in that release's wheel (tests/data/integrations)."""
    layouts = json.loads((ROOT / "tests" / "data" / "integrations" / "layouts.json").read_text())
    result = run_cli(capsys, "explain", TURN, "--backend", "--probe", "--platform", "cuda", "-o", "json")
    assert result.code == 0, result.err
    host = json.loads(result.out)["host"]
    assert host["plugin_layouts"] == layouts[VERSION]
    assert all(problems == [] for problems in host["plugin_shapes"].values())

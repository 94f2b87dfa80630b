"""`serve --dry-run`: golden output, secrets redacted, works with no GPU and no vllm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.serve.conftest import ROOT

GOLDEN = ROOT / "tests" / "data" / "serve" / "dry_run.txt"


def _dry(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MINICPMO_TOKEN2WAV_TRT"}
    env.update(
        PATH="/usr/bin:/bin",
        PYTHONPATH=str(ROOT),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        HF_TOKEN="hf_secret",
    )
    return subprocess.run(
        [sys.executable, "-m", "omni_deploy", "serve", str(ROOT / "deploy" / "turn-bench.yaml"), "--dry-run",
         "--run-dir", str(tmp_path / "run"), "--env", "HF_TOKEN=hf_secret_value", "--env", "MY_API_KEY=k",
         "--env", "LOG_LEVEL=debug", *args],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_golden_text(tmp_path: Path) -> None:
    done = _dry(tmp_path, "--served-model-name", "crossref-test", "--", "--trust-remote-code")
    assert done.returncode == 0, done.stderr
    text = done.stdout.replace(str(tmp_path), "<tmp>")
    assert text == GOLDEN.read_text(), text
    assert "hf_secret_value" not in done.stdout + done.stderr
    record = (tmp_path / "run" / "launch.json").read_text()
    assert "hf_secret_value" not in record and json.loads(record)["dry_run"] is True


def test_json(tmp_path: Path) -> None:
    done = _dry(tmp_path, "-o", "json", "--spk-backend", "cpu-onnxruntime")
    data = json.loads(done.stdout)
    assert set(data) == {"argv", "env", "config", "speaker_backend", "preflight_refusals"}
    assert data["speaker_backend"] == "cpu-onnxruntime"
    assert data["env"]["HF_TOKEN"] == "<redacted>" and data["env"]["MY_API_KEY"] == "<redacted>"
    assert data["env"]["LOG_LEVEL"] == "debug"
    assert data["argv"][:4] == ["vllm", "serve", "openbmb/MiniCPM-o-4_5", "--omni"]
    rendered = Path(data["config"]).read_text()
    assert "token2wav_device_spk: false" in rendered  # the override is in the config vllm-omni gets
    assert "platforms:" not in rendered

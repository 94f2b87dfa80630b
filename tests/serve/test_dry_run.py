"""`serve --dry-run`: golden output, secrets redacted, works with no GPU and no vllm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.serve.conftest import ROOT
from tests.support.json_shapes import assert_shape

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
    text = done.stdout.replace(str(tmp_path), "<tmp>").replace(str(ROOT), "<checkout>")
    assert text == GOLDEN.read_text(), text
    assert "hf_secret_value" not in done.stdout + done.stderr
    record = (tmp_path / "run" / "launch.json").read_text()
    assert "hf_secret_value" not in record and json.loads(record)["dry_run"] is True


def test_json(tmp_path: Path) -> None:
    done = _dry(tmp_path, "-o", "json", "--spk-backend", "cpu-onnxruntime")
    data = json.loads(done.stdout)
    assert_shape(data, "serve")
    assert data["speaker_backend"] == "cpu-onnxruntime"
    assert data["env"]["HF_TOKEN"] == "<redacted>" and data["env"]["MY_API_KEY"] == "<redacted>"
    assert data["env"]["LOG_LEVEL"] == "debug"
    assert data["argv"][:4] == ["vllm", "serve", "openbmb/MiniCPM-o-4_5", "--omni"]
    rendered = Path(data["config"]).read_text()
    assert "token2wav_device_spk: false" in rendered  # the override is in the config vllm-omni gets
    assert "platforms:" not in rendered


def _bare_dry(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    return subprocess.run(
        [sys.executable, "-m", "omni_deploy", "serve", *args],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_dry_run_writes_nothing_without_run_dir(tmp_path: Path) -> None:
    done = _bare_dry(tmp_path, str(ROOT / "deploy" / "turn-bench.yaml"), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "config: not written" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no cache dir, no run dir
    data = json.loads(_bare_dry(tmp_path, "--dry-run", "-o", "json").stdout)
    assert_shape(data, "serve")
    assert data["config"] is None and data["run_dir"] is None
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_passthrough_without_file(tmp_path: Path) -> None:
    done = _bare_dry(tmp_path, "--dry-run", "-o", "json", "--", "--seed", "9000", "--trust-remote-code")
    assert done.returncode == 0, done.stderr
    argv = json.loads(done.stdout)["argv"]
    assert argv[-3:] == ["--seed", "9000", "--trust-remote-code"]
    # The example: --port after -- is no longer taken for FILE; serve says to use its own option.
    port = _bare_dry(tmp_path, "--dry-run", "--", "--port", "9000")
    assert port.returncode == 2 and "no such file" not in port.stderr and "use its own option" in port.stderr
    assert argv[argv.index("--deploy-config") + 1].endswith("deploy.yaml")  # the bundled default file
    with_file = _bare_dry(
        tmp_path, str(ROOT / "deploy" / "turn-bench.yaml"), "--dry-run", "-o", "json", "--", "--enforce-eager"
    )
    assert json.loads(with_file.stdout)["argv"][-1] == "--enforce-eager"


def test_json_needs_dry_run_and_platform_any_case(tmp_path: Path) -> None:
    refused = _bare_dry(tmp_path, "-o", "json")
    assert refused.returncode == 2 and "-o json needs --dry-run" in refused.stderr
    upper = _bare_dry(tmp_path, "--dry-run", "--platform", "CUDA", "-o", "json")
    assert upper.returncode == 0 and json.loads(upper.stdout)["platform"] == "cuda"
    wrong = _bare_dry(tmp_path, "--dry-run", "--platform", "all")
    assert wrong.returncode == 2 and "does not apply" in wrong.stderr


def _serve_decision(tmp_path: Path, **env: str) -> tuple[str, str]:
    """serve's speaker decision on this host (its probe), with `env` added: (decision line, stderr)."""
    own = ("OMNI_DEPLOY_SPK_", "VLLM_", "MINICPMO_")  # only what the test sets decides
    base = {k: v for k, v in os.environ.items() if not k.startswith(own)}
    done = subprocess.run(
        [sys.executable, "-m", "omni_deploy", "serve", str(ROOT / "deploy" / "turn-bench.yaml"), "--dry-run",
         "--platform", "cuda"],
        env={**base, "PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path / "cache"), **env},
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("speaker backend:")]
    return line, done.stderr


def test_serve_decides_with_vllms_reading_of_the_plugin_allowlist(tmp_path: Path) -> None:
    # vLLM splits VLLM_PLUGINS on commas and strips nothing: " omni_deploy_campplus" is not the plugin.
    line, err = _serve_decision(tmp_path, VLLM_PLUGINS="vllm_omni_register_models, omni_deploy_campplus")
    assert line.startswith("speaker backend: cpu-onnxruntime")
    assert "vLLM compares ' omni_deploy_campplus'" in err
    assert "VLLM_PLUGINS=vllm_omni_register_models,omni_deploy_campplus" in err
    line, _ = _serve_decision(tmp_path, VLLM_PLUGINS="vllm_omni_register_models,omni_deploy_campplus")
    assert line.startswith("speaker backend: cuda-torch")


def test_serve_names_an_unverified_vllm_omni_and_the_switch_refuses_it(tmp_path: Path) -> None:
    # An installed vllm-omni as its metadata says (the version is all serve's probe reads of it here).
    site = tmp_path / "site"
    (site / "vllm_omni-0.99.0.dist-info").mkdir(parents=True)
    (site / "vllm_omni-0.99.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: vllm-omni\nVersion: 0.99.0\n"
    )
    path = os.pathsep.join([str(site), str(ROOT)])
    line, err = _serve_decision(tmp_path, PYTHONPATH=path)
    assert line.startswith("speaker backend: cuda-torch")  # it still patches where the shapes are there
    assert "vllm-omni 0.99.0 is not a release the plugin is verified against (0.30.0, 0.32.0rc1)" in err
    line, err = _serve_decision(tmp_path, PYTHONPATH=path, OMNI_DEPLOY_SPK_VERIFIED_ONLY="1")
    assert (
        line.startswith("speaker backend: cpu-onnxruntime")
        and "OMNI_DEPLOY_SPK_VERIFIED_ONLY=1 refuses it" in err
    )

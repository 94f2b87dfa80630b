"""One settings resolution for every command: project file, then environment, then options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "deploy" / "turn-bench.yaml"
NEWER = ROOT / "tests" / "data" / "validate" / "negative" / "newer_version_key.yaml"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose settings say 0.26.0 (older than the default, and a release that serves the
    bundled pipeline), worked in from a folder below its root."""
    for name in ("OMNI_DEPLOY_TARGET_VERSION", "OMNI_DEPLOY_STRICT", "OMNI_DEPLOY_IGNORE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / ".omni-deploy.yaml").write_text('target-version: "0.26.0"\n')
    inner = tmp_path / "ops"
    inner.mkdir()
    monkeypatch.chdir(inner)
    return tmp_path


def _explain_target(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    result = run_cli(capsys, "explain", str(BENCH), "--backend", "-o", "json", *args)
    assert result.code == 0, result.err
    return str(json.loads(result.out)["target_version"])


def _k8s_target(capsys: pytest.CaptureFixture[str]) -> str:
    result = run_cli(capsys, "k8s", str(BENCH), "--model", "openbmb/MiniCPM-o-4_5", "-o", "json")
    assert result.code == 0, result.err
    (config,) = [o for o in json.loads(result.out)["items"] if o["kind"] == "ConfigMap"]
    return str(json.loads(config["data"]["launch.json"])["target_version"])


def _serve_warns_of_an_unread_key(capsys: pytest.CaptureFixture[str]) -> bool:
    """serve's check sees ref_audio_max_seconds as unread (W310): the target is older than 0.30.0."""
    result = run_cli(capsys, "serve", str(NEWER), "--dry-run", "--platform", "cuda", "-o", "json")
    assert result.code == 0, result.err
    return "warning[W310]" in result.err


def test_the_project_target_version_applies_to_every_command(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    # Before: validate read it, explain and k8s went on with 0.30.0.
    assert _explain_target(capsys) == "0.26.0"
    assert _k8s_target(capsys) == "0.26.0"
    assert _serve_warns_of_an_unread_key(capsys)
    validated = run_cli(capsys, "validate", str(NEWER), "-o", "json")
    assert "W310" in validated.out  # 0.26.0 does not read ref_audio_max_seconds


def test_environment_over_project_and_option_over_both(
    capsys: pytest.CaptureFixture[str], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMNI_DEPLOY_TARGET_VERSION", "0.28.0")
    assert _explain_target(capsys) == "0.28.0"
    assert _k8s_target(capsys) == "0.28.0"
    assert _explain_target(capsys, "--target-version", "0.22.0") == "0.22.0"
    monkeypatch.setenv("OMNI_DEPLOY_TARGET_VERSION", "0.30.0")  # reads the key: no W310
    assert not _serve_warns_of_an_unread_key(capsys)


def test_strict_and_ignore_in_each_layer(
    capsys: pytest.CaptureFixture[str], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / ".omni-deploy.yaml").write_text('target-version: "0.28.0"\nstrict: true\n')
    assert run_cli(capsys, "validate", str(NEWER)).code == 1  # the W310 counts as an error
    monkeypatch.setenv("OMNI_DEPLOY_STRICT", "0")
    assert run_cli(capsys, "validate", str(NEWER)).code == 0
    assert run_cli(capsys, "validate", str(NEWER), "--strict").code == 1
    monkeypatch.setenv("OMNI_DEPLOY_STRICT", "1")
    assert run_cli(capsys, "validate", str(NEWER), "--no-strict").code == 0
    # ignore adds up across the three: the file's, the variable's and the option's codes.
    (project / ".omni-deploy.yaml").write_text('target-version: "0.28.0"\nstrict: true\nignore: [W999]\n')
    monkeypatch.setenv("OMNI_DEPLOY_IGNORE", "W310")
    assert run_cli(capsys, "validate", str(NEWER)).code == 0
    monkeypatch.delenv("OMNI_DEPLOY_IGNORE")
    assert run_cli(capsys, "validate", str(NEWER), "--ignore", "W310").code == 0


def test_project_ignore_applies_to_serve_and_k8s_checks(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    (project / ".omni-deploy.yaml").write_text('target-version: "0.28.0"\nstrict: true\n')
    refused = run_cli(capsys, "serve", str(NEWER), "--dry-run", "--platform", "cuda")
    assert refused.code == 1 and "W310" in refused.err  # strict: the warning stops the launch
    (project / ".omni-deploy.yaml").write_text('target-version: "0.28.0"\nstrict: true\nignore: [W310]\n')
    assert run_cli(capsys, "serve", str(NEWER), "--dry-run", "--platform", "cuda").code == 0
    k8s = run_cli(capsys, "k8s", str(NEWER), "--model", "openbmb/MiniCPM-o-4_5")
    assert k8s.code == 0 and "W310" not in k8s.err


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("OMNI_DEPLOY_TARGET_VERSION", "banana", "OMNI_DEPLOY_TARGET_VERSION: 'banana' is not a version"),
        ("OMNI_DEPLOY_STRICT", "maybe", "OMNI_DEPLOY_STRICT: 'maybe' is not a truth value"),
        ("OMNI_DEPLOY_IGNORE", "W3", "OMNI_DEPLOY_IGNORE: not a finding code: W3"),
    ],
)
def test_a_bad_variable_is_a_usage_error_that_names_it(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    said: str,
) -> None:
    monkeypatch.setenv(variable, value)
    result = run_cli(capsys, "validate", str(BENCH))
    assert result.code == 2 and said in result.err and "Traceback" not in result.err


def test_a_bad_project_value_names_the_file_for_every_command(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    (project / ".omni-deploy.yaml").write_text('target-version: "0.3"\n')
    for args in (["validate", str(BENCH)], ["explain", str(BENCH)], ["serve", str(BENCH), "--dry-run"]):
        result = run_cli(capsys, *args)
        assert result.code == 2, args
        assert (
            f"{project / '.omni-deploy.yaml'}: target-version: '0.3' is not a vllm-omni release" in result.err
        )

"""explain --backend, serve --dry-run and k8s's launch record name the same speaker backend.

All three take it from the one launch spec; these tests hold them together over every deploy
file under tests/data/ that loads (library level, so files that fail validation count too), and
through the CLI for the stage-environment overlay that k8s once decided without.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from omni_deploy.common.errors import ConfigError, OmniDeployError
from omni_deploy.deployment.model import Deployment
from omni_deploy.explain.explanation import explain
from omni_deploy.integrations.speaker_rules import DECISION_ENV
from omni_deploy.k8s.build import build
from omni_deploy.k8s.options import K8sOptions
from omni_deploy.launch.options import LaunchOptions
from omni_deploy.serve.prepare import prepare
from omni_deploy.serve.request import ServeRequest
from omni_deploy.speaker_backend.host import assumed_host, probe_host
from omni_deploy.validate.context import Options
from omni_deploy.validate.runner import validate_deployment
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
TARGET = "0.30.0"
STAGE_ENV_CPU = ROOT / "tests" / "data" / "explain" / "stage_env_cpu.yaml"
WIDE = 64  # GPUs per node for k8s: wide enough that only malformed placements fail


def _loadable() -> list[Path]:
    found = []
    for path in sorted((ROOT / "tests" / "data").rglob("*.yaml")):
        try:
            Deployment.load(str(path))
        except ConfigError:
            continue
        found.append(path)
    return found


LOADABLE = _loadable()


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    """This shell's environment without the speaker variables (k8s decides for a pod without them)."""
    return {k: v for k, v in os.environ.items() if k not in DECISION_ENV}


@pytest.fixture(scope="module")
def this_host():  # type: ignore[no-untyped-def]
    return probe_host()


def _explained(deployment: Deployment, env: dict[str, str]) -> str:
    found = explain(deployment, ("cuda",), True, assumed_host(TARGET), env, None, TARGET)
    return found.decisions["cuda"].speaker_backend


def _served(deployment: Deployment, path: Path, host: Any, env: dict[str, str]) -> str | None:
    request = ServeRequest(str(path), "cuda", TARGET, LaunchOptions(platform="cuda"), dry_run=True)
    try:
        return prepare(request, deployment, host, env, lambda _: None).decision.speaker_backend
    except OmniDeployError:
        return None


def _k8s_record(deployment: Deployment) -> dict[str, Any] | None:
    try:
        objects = build(deployment, K8sOptions(model="m/x", gpus_per_node=WIDE), TARGET, None)
    except OmniDeployError:
        return None
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap"]
    record: dict[str, Any] = json.loads(config_map["data"]["launch.json"])
    return record


def test_the_files_include_the_stage_environment_overlay() -> None:
    assert STAGE_ENV_CPU in LOADABLE and len(LOADABLE) > 40


@pytest.mark.parametrize(
    "path", LOADABLE, ids=[str(p.relative_to(ROOT / "tests" / "data")) for p in LOADABLE]
)
def test_serve_k8s_and_explain_agree(path: Path, this_host: Any, env: dict[str, str]) -> None:
    deployment = Deployment.load(str(path))
    explained = _explained(deployment, env)
    served = _served(deployment, path, this_host, env)
    record = _k8s_record(deployment)
    for said in (served, record["speaker"]["speaker_backend"] if record else None):
        if said is not None:
            assert said == explained
    if served is None or record is None:
        # What serve or k8s cannot launch, validation refuses first (the CLI never gets there).
        report = validate_deployment(
            deployment, Options(platforms=("cuda",), target_version=TARGET, gpus_per_node=WIDE)
        )
        assert not report.valid, [f.text() for f in report.findings]


def test_the_stage_environment_reaches_all_three_commands(capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    for name in DECISION_ENV:
        monkeypatch.delenv(name, raising=False)
    file = str(STAGE_ENV_CPU)
    explained = run_cli(capsys, "explain", "--backend", file, "--platform", "cuda", "-o", "json")
    assert explained.code == 0, explained.err
    served = run_cli(capsys, "serve", file, "--dry-run", "--platform", "cuda", "-o", "json")
    assert served.code == 0, served.err
    manifests = run_cli(capsys, "k8s", file, "--model", "m/x", "-o", "json")
    assert manifests.code == 0, manifests.err
    (config_map,) = [o for o in json.loads(manifests.out)["items"] if o["kind"] == "ConfigMap"]
    assert "OMNI_DEPLOY_SPK_BACKEND: cpu-onnxruntime" in config_map["data"]["deploy.yaml"]
    backends = {
        "explain": json.loads(explained.out)["platforms"]["cuda"]["speaker_backend"],
        "serve": json.loads(served.out)["speaker_backend"],
        "k8s": json.loads(config_map["data"]["launch.json"])["speaker"]["speaker_backend"],
    }
    assert backends == dict.fromkeys(backends, "cpu-onnxruntime")

"""The launch plan's environment: where the server's processes write their speaker reports, and
that vLLM's Ray executor is told to copy it to Ray workers when a stage runs under Ray."""

from __future__ import annotations

from pathlib import Path

from omni_deploy.deployment.model import Deployment
from omni_deploy.launch.options import LaunchOptions
from omni_deploy.launch.spec import launch_spec
from omni_deploy.speaker_backend.host import assumed_host

ROOT = Path(__file__).resolve().parents[2]
RAY = ROOT / "tests" / "data" / "explain" / "ray_stage_env.yaml"


def _env(path: Path, base: dict[str, str] | None = None, report_dir: str | None = "/run/speaker",
         passthrough: tuple[str, ...] = ()) -> dict[str, str | None]:  # fmt: skip
    options = LaunchOptions(passthrough=passthrough)
    spec = launch_spec(Deployment.load(str(path)), options, host=assumed_host("0.30.0"), env=base or {})
    return spec.plan("/run/deploy.yaml", report_dir=report_dir).env_changes


def test_serve_names_the_report_directory() -> None:
    env = _env(ROOT / "deploy" / "turn-bench.yaml")
    assert (
        env["OMNI_DEPLOY_SPK_REPORT_DIR"] == "/run/speaker" and "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY" not in env
    )


def test_k8s_and_other_callers_without_a_report_directory_set_nothing() -> None:
    assert "OMNI_DEPLOY_SPK_REPORT_DIR" not in _env(ROOT / "deploy" / "turn-bench.yaml", report_dir=None)


def test_a_ray_stage_gets_the_report_directory_copied_to_its_workers() -> None:
    assert _env(RAY)["VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"] == "OMNI_DEPLOY_SPK_REPORT_DIR"
    kept = _env(RAY, {"VLLM_RAY_EXTRA_ENV_VARS_TO_COPY": "MY_VAR"})
    assert (
        kept["VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"] == "MY_VAR,OMNI_DEPLOY_SPK_REPORT_DIR"
    )  # added to, not replaced
    already = _env(RAY, {"VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY": "OMNI_DEPLOY_"})
    assert "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY" not in already


def test_ray_asked_for_on_the_command_line_counts_too() -> None:
    env = _env(ROOT / "deploy" / "turn-bench.yaml", passthrough=("--distributed-executor-backend", "ray"))
    assert env["VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"] == "OMNI_DEPLOY_SPK_REPORT_DIR"

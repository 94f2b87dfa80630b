"""The launch plan: argv, environment changes and the rendered config, computed before any process.

Pure apart from reading the environment passed in; preflight (host checks) and the run directory
are separate edges.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from omni_deploy.config.nodes import Entry, Map, Origin, Scalar
from omni_deploy.errors import OmniDeployError
from omni_deploy.integration_env import (
    CPU_ORT,
    CUDA_TORCH,
    SPK_BACKEND,
    TENSORRT,
    VLLM_OMNI_TRT,
    Backend,
)
from omni_deploy.resolve.speaker import SpeakerDecision

DEFAULT_MODEL = "openbmb/MiniCPM-o-4_5"


class PlanError(OmniDeployError):
    """The options ask for something that cannot be launched."""


@dataclass
class LaunchOptions:
    model: str = DEFAULT_MODEL
    platform: str = "cuda"
    host: str = "127.0.0.1"
    port: int = 8091
    served_model_name: str | None = None
    spk_backend: Backend | None = None  # None: what the file says
    extra_env: dict[str, str] = field(default_factory=dict)
    passthrough: tuple[str, ...] = ()


@dataclass
class LaunchPlan:
    argv: list[str]
    env_changes: dict[str, str | None]  # None: removed from the environment
    speaker: SpeakerDecision

    @property
    def shown_argv(self) -> list[str]:
        """The argv as printed and recorded: secret pass-through values redacted."""
        from omni_deploy.serve.redact import redact_argv

        return redact_argv(self.argv)

    def shell(self) -> str:
        """The command line to show (secrets redacted); the process gets `argv` itself."""
        return shlex.join(self.shown_argv)

    def child_env(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        for key, value in self.env_changes.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env


def _flag_value(args: tuple[str, ...], flag: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def check_passthrough(args: tuple[str, ...], stage_ids: set[int]) -> None:
    """Checks the multi-node flags need before anything starts."""
    for managed in ("--omni", "--deploy-config", "--host", "--port"):
        if any(a == managed or a.startswith(managed + "=") for a in args):
            raise PlanError(
                f"{managed} is set by omni-deploy serve; use its own option instead of passing it through"
            )
    if "--headless" in args:
        if _flag_value(args, "--omni-master-address") is None:
            raise PlanError("--headless needs --omni-master-address (where the master stage runs)")
        stage = _flag_value(args, "--stage-id")
        if stage is None:
            raise PlanError("--headless needs --stage-id N (the stage this node runs)")
    stage = _flag_value(args, "--stage-id")
    if stage is not None and (not stage.isdigit() or int(stage) not in stage_ids):
        raise PlanError(f"--stage-id {stage}: the deploy config has stages {sorted(stage_ids)}")
    if _flag_value(args, "--worker-backend") == "ray" and _flag_value(args, "--ray-address") is None:
        raise PlanError("--worker-backend ray needs --ray-address")


def apply_speaker_override(
    config: Map, extra: Map | None, backend: Backend | None, origin: Origin
) -> list[str]:
    """Write --spk-backend into the rendered config's Code2Wav extra, so vllm-omni and the plugin agree."""
    if backend is None or extra is None:
        return []
    notes = []
    wanted = backend == TENSORRT
    current = extra.get("token2wav_trt")
    if (isinstance(current, Scalar) and current.value is not wanted) or (current is None and wanted):
        extra.entries["token2wav_trt"] = Entry(origin, Scalar(wanted, origin))
        notes.append(
            f"rendered config: token2wav_trt set to {str(wanted).lower()} by --spk-backend {backend}"
        )
    if backend in (CUDA_TORCH, CPU_ORT):
        device_spk = backend == CUDA_TORCH
        node = extra.get("token2wav_device_spk")
        if node is not None or not device_spk:
            extra.entries["token2wav_device_spk"] = Entry(origin, Scalar(device_spk, origin))
            notes.append(
                f"rendered config: token2wav_device_spk set to {str(device_spk).lower()} by --spk-backend"
            )
    return notes


def build_plan(
    options: LaunchOptions, config_path: str, decision: SpeakerDecision, base_env: dict[str, str]
) -> LaunchPlan:
    argv = [
        "vllm",
        "serve",
        options.model,
        "--omni",
        "--deploy-config",
        config_path,
        "--host",
        options.host,
        "--port",
        str(options.port),
    ]
    if options.served_model_name:
        argv += ["--served-model-name", options.served_model_name]
    argv += list(options.passthrough)
    # The speaker backend travels in the rendered deploy file (with --spk-backend written into it),
    # which omni-deploy's plugin reads in the Code2Wav stage: no OMNI_DEPLOY_SPK_* variable is set,
    # so the server decides as a plain `vllm serve --deploy-config` of the same file would.
    env: dict[str, str | None] = {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
    backend = decision.speaker_backend
    if backend == TENSORRT and options.spk_backend == TENSORRT:
        env[VLLM_OMNI_TRT] = "1"
    elif backend != TENSORRT and base_env.get(VLLM_OMNI_TRT) == "1":
        env[VLLM_OMNI_TRT] = None  # would force TensorRT behind the chosen backend's back
    if options.spk_backend is not None and base_env.get(SPK_BACKEND):
        env[SPK_BACKEND] = None  # an inherited override would beat the --spk-backend written in the file
    env.update(options.extra_env)
    return LaunchPlan(argv, env, decision)


def plan_record(plan: LaunchPlan, extra: dict[str, Any]) -> dict[str, Any]:
    from omni_deploy.serve.redact import redact_env

    return {
        "argv": plan.shown_argv,
        "command": plan.shell(),
        "env": redact_env(plan.env_changes),
        "speaker": plan.speaker.as_dict() | {"platform": plan.speaker.platform},
        **extra,
    }

"""The command a launch runs: argv and environment changes, and the run record that keeps them.

Pure apart from reading the environment passed in; preflight (host checks) and the run directory
are serve's edges.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omni_deploy.common.output.escape import shell_join
from omni_deploy.common.redact import redact_argv, redact_env
from omni_deploy.integrations.speaker_rules import (
    ENV_BACKEND,
    ENV_RAY_EXTRA_VARS,
    ENV_REPORT_DIR,
    ENV_TRT,
    TENSORRT,
    ray_copies,
    ray_fix,
)
from omni_deploy.launch.options import LaunchOptions
from omni_deploy.speaker_backend import SpeakerDecision


@dataclass
class LaunchPlan:
    argv: list[str]
    env_changes: dict[str, str | None]  # None: removed from the environment
    speaker: SpeakerDecision

    @property
    def shown_argv(self) -> list[str]:
        """The argv as printed and recorded: secret pass-through values redacted."""
        return redact_argv(self.argv)

    def shell(self) -> str:
        """The command line to show (secrets redacted); the process gets `argv` itself."""
        return shell_join(self.shown_argv)

    def child_env(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        for key, value in self.env_changes.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def record(self, fields: dict[str, Any]) -> dict[str, Any]:
        """The run record: the command (redacted), its environment changes, the decision, `fields`."""
        return {
            "argv": self.shown_argv,
            "command": self.shell(),
            "env": redact_env(self.env_changes),
            "speaker": self.speaker.as_dict() | {"platform": self.speaker.platform},
            **fields,
        }


def build_plan(
    options: LaunchOptions,
    config_path: str,
    decision: SpeakerDecision,
    base_env: Mapping[str, str],
    report_dir: str | None = None,
    ray: bool = False,
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
    # which omni-deploy's plugin reads in the Code2Wav stage: no OMNI_DEPLOY_SPK_* variable that decides is set,
    # so the server decides as a plain `vllm serve --deploy-config` of the same file would.
    env: dict[str, str | None] = {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
    backend = decision.speaker_backend
    if backend == TENSORRT and options.spk_backend == TENSORRT:
        env[ENV_TRT] = "1"
    elif backend != TENSORRT and base_env.get(ENV_TRT) == "1":
        env[ENV_TRT] = None  # would force TensorRT behind the chosen backend's back
    if options.spk_backend is not None and base_env.get(ENV_BACKEND):
        env[ENV_BACKEND] = None  # an inherited override would beat the --spk-backend written in the file
    if report_dir is not None:
        # Where every process the plugin patches writes its report, whatever the log level; vLLM's
        # Ray executor copies it to Ray workers only when told to (vllm/ray/ray_env.py).
        env[ENV_REPORT_DIR] = report_dir
        if ray and not ray_copies(ENV_REPORT_DIR, base_env):
            env[ENV_RAY_EXTRA_VARS] = ray_fix([ENV_REPORT_DIR], base_env).split("=", 1)[1]
    env.update(options.extra_env)
    return LaunchPlan(argv, env, decision)

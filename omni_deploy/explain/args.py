"""The options of `omni-deploy explain`, declared once (each field is its option:
omni_deploy/common/cli_fields.py)."""

from __future__ import annotations

from dataclasses import dataclass

from omni_deploy.common import cli_fields as cf
from omni_deploy.common.cli_fields import option, shared_option
from omni_deploy.integrations.speaker_rules import BACKENDS


@dataclass(frozen=True)
class ExplainArgs:
    backend: bool = option(
        "--backend", default=False, is_flag=True, help="Explain the speaker-embedding (CAM++) backend only."
    )
    platform: str | None = option(
        "--platform",
        type=cf.platform("all"),
        default=None,
        help="Platform to explain, any case (default: all five with --backend; cuda plus the file's sections otherwise).",
    )
    probe: bool = option(
        "--probe",
        default=False,
        is_flag=True,
        help="Inspect this host (GPUs via nvidia-smi, packages, the plugin).",
    )
    spk_backend: str = option(
        "--spk-backend",
        type=cf.choice("auto", *BACKENDS),
        default="auto",
        show_default=True,
        help="What `serve --spk-backend` would override the file with.",
    )
    pipeline: str | None = option(
        "--pipeline",
        type=cf.PIPELINE,
        default=None,
        help="Pipeline of a file that neither names nor implies one (a vllm-omni registry name).",
    )
    target_version: str | None = shared_option("target_version", "assume on the serving host")
    fmt: str = shared_option(
        "output",
        ("text", "json"),
        default="text",
        help="text for people, json for programs (docs/json-output.md).",
    )
    stdin_filename: str | None = shared_option("stdin_filename")

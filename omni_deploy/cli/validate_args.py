"""`omni-deploy validate`'s check options, declared once: each field is its option (flags, help,
type; omni_deploy/common/cli_fields.py), and `options()` turns what was given into the checks'
Options (settings resolved, files read)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from omni_deploy.cli.settings import ENV_IGNORE, ENV_STRICT
from omni_deploy.common import cli_fields as cf
from omni_deploy.common.cli_fields import option, shared_option
from omni_deploy.common.defaults import MAX_GPUS_PER_NODE

if TYPE_CHECKING:
    from omni_deploy.validate.context import Options


def model_folder(value: str | None) -> str | None:
    """--model as the server check's child will read it: a folder's config.json must be a regular
    file of a sane size (a FIFO there would hold the child until the check's time limit)."""
    if not value or not Path(value).is_dir():
        return value  # a name the child cannot find locally: it says so (nothing is downloaded)
    from omni_deploy.common import guarded

    config = Path(value) / "config.json"
    if os.path.lexists(config):
        try:
            guarded.read_bytes(config, str(config), 64 * 1024 * 1024)
        except guarded.Refused as refused:
            raise cf.OptionValueError(refused.why, hint=f"--model ({config})") from None
    return value


@dataclass(frozen=True)
class ValidateArgs:
    platforms: tuple[str, ...] = option(
        "--platform",
        default=(),
        multiple=True,
        type=cf.platform("all"),
        help="Platforms to check (repeatable, any case). Default: cuda plus every platform the file has a section for.",
    )
    strict: bool | None = option(
        "--strict/--no-strict",
        default=None,
        help=f"Warnings count as errors (default: {ENV_STRICT}, else the project settings' strict, else off).",
    )
    ignore: tuple[str, ...] = option(
        "--ignore",
        default=(),
        multiple=True,
        metavar="CODE[,CODE]",
        help=f"Leave these finding codes out (repeatable; adds to {ENV_IGNORE} and the project settings' "
        "ignore). One line: a comment '# omni-deploy: ignore[W310]' on it, or alone on the line above.",
    )
    target_version: str | None = shared_option(
        "target_version",
        "check against",
        "A release is checked against what its code reads; an installed vllm-omni that is not a release is read now.",
    )
    vllm_omni_source: Path | None = option(
        "--vllm-omni-source",
        type=cf.path(exists=True, file_okay=False),
        default=None,
        help="A vllm-omni source tree (the folder that holds vllm_omni/, e.g. a main checkout) read as the "
        "target's code.",
    )
    gpu_memory_gib: float | None = option(
        "--gpu-memory-gib",
        default=None,
        type=cf.real(0.0, 1e6, low_open=True),
        help="Check KV budgets against this card size.",
    )
    pipeline: str | None = option(
        "--pipeline",
        type=cf.PIPELINE,
        default=None,
        help="Pipeline of files that neither name nor imply one (a vllm-omni registry name, e.g. minicpmo_4_5).",
    )
    model_config: Path | None = option(
        "--model-config",
        default=None,
        type=cf.path(exists=True, dir_okay=False),
        help="The model's config.json: lets the Talker KV capacity be checked.",
    )
    gpus_per_node: int | None = option(
        "--gpus-per-node",
        default=None,
        type=cf.count(1, MAX_GPUS_PER_NODE),
        help="Check that the stages can be spread over nodes of this many GPUs (as `omni-deploy k8s` places them).",
    )
    server_check: str = option(
        "--server-check",
        type=cf.choice("auto", "on", "require", "off"),
        default="auto",
        show_default=True,
        help="Also run vllm-omni's own start-up config code on the files, in a child process of the "
        "serving environment's interpreter (no GPU, no weights): auto runs it when that vllm-omni is the "
        "target version; on makes not running an error and a file it cannot decide a warning; require "
        "makes both errors; off skips it.",
    )
    server_python: str | None = option(
        "--server-python",
        type=cf.path(exists=True, dir_okay=False, as_path=False),
        default=None,
        help="The serving environment's Python (the one that has vllm-omni); default: this one.",
    )
    model: str | None = option(
        "--model",
        default=None,
        check=model_folder,
        help="The model the server will run (a local folder), for pipelines whose set-up reads its "
        "config.json; nothing is downloaded.",
    )

    def options(self) -> Options:
        """The checks' options: the settings resolved (project, environment, options), files read."""
        import click

        from omni_deploy.cli.settings import resolve
        from omni_deploy.config.stage_schema import PLATFORMS
        from omni_deploy.validate.context import Options, model_shape_from_config

        settings = resolve(self.target_version, self.strict, self.ignore)
        platforms = self.platforms
        chosen = (
            None if not platforms else (PLATFORMS if "all" in platforms else tuple(dict.fromkeys(platforms)))
        )
        shape = None
        if self.model_config is not None:
            try:
                shape = model_shape_from_config(self.model_config)
            except (ValueError, KeyError, TypeError) as exc:
                raise click.BadParameter(
                    f"cannot read the Talker's shape from it: {exc}", param_hint="--model-config"
                ) from None
        return Options(
            platforms=chosen,
            strict=settings.strict,
            target_version=settings.target_version,
            gpu_memory_gib=self.gpu_memory_gib,
            pipeline=self.pipeline,
            model_shape=shape,
            gpus_per_node=self.gpus_per_node,
            vllm_omni_source=self.vllm_omni_source,
            ignore=settings.ignore,
            server_check=self.server_check,
            server_python=self.server_python,
            model=self.model,
        )

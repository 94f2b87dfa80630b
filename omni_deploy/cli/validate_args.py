"""`omni-deploy validate`'s options, declared once: each field is its option (flags, help, type;
omni_deploy/common/cli_fields.py). ValidateArgs holds the checks' options, and `options()` turns
what was given into the checks' Options (settings resolved, files read); ValidateOutputArgs holds
how the findings are reported and what is done with them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from omni_deploy.cli.settings import ENV_IGNORE, ENV_STRICT
from omni_deploy.common import cli_fields as cf
from omni_deploy.common.cli_fields import option, shared_option
from omni_deploy.common.defaults import MAX_GPUS_PER_NODE
from omni_deploy.validate.reporters import REPORTERS

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


# The --output formats are the reporters' names, in the registry's order (the first is the
# default): a reporter added to REPORTERS is a format validate offers, with no list to keep in step.
FORMATS: tuple[str, ...] = tuple(REPORTERS)


@dataclass(frozen=True, kw_only=True)
class ValidateOutputArgs:
    fmt: str = shared_option(
        "output",
        FORMATS,
        default=FORMATS[0],  # the shared option's default is its first format
        help="text: grouped by file, with code frames; concise: one line per finding (grep, editors); "
        "json; sarif (code scanning); github (workflow annotations); junit (XML).",
    )
    stdin_filename: str | None = shared_option("stdin_filename")
    skip_non_deploy: bool = option(
        "--skip-non-deploy",
        default=False,
        is_flag=True,
        help="Skip, without a finding, files that are not deploy files (several YAML documents, or "
        "none of vllm-omni's top-level keys); the pre-commit hook passes it.",
    )
    quiet: bool = option(
        "-q",
        "--quiet",
        default=False,
        is_flag=True,
        help="Text output: the findings only; no summary, nothing when clean.",
    )
    statistics: bool = option(
        "--statistics",
        default=False,
        is_flag=True,
        help="Text output: how often each code occurs (and [*] where --fix fixes it) instead of the findings.",
    )
    exit_zero: bool = option(
        "--exit-zero",
        default=False,
        is_flag=True,
        help="Exit 0 even when there are errors (usage errors still exit 2).",
    )
    fix: bool = option(
        "--fix",
        default=False,
        is_flag=True,
        help="Apply the fixes with one right answer (marked `= fix:`: a typo renamed to the key it "
        "misspells, quotes dropped around a boolean or number) in place, comments and layout kept; "
        "a file is written only after its fixed text validated. With '-' the fixed text goes to stdout.",
    )
    show_diff: bool = option(  # the field is the option's name: --diff fills show_diff
        "--diff",
        default=False,
        is_flag=True,
        help="Print what --fix would change, as a unified diff; write nothing.",
    )

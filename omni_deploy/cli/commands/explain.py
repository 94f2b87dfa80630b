"""`omni-deploy explain`: what a deploy file will do, per platform, before a GPU is touched."""

from __future__ import annotations

import os

import click

from omni_deploy.cli.file_options import file_argument, stdin_filename_option
from omni_deploy.cli.params import PipelineType, PlatformType, backend_choice, output_option
from omni_deploy.cli.settings import target_version_option
from omni_deploy.integrations.speaker_rules import BACKENDS


@click.command(short_help="Where CAM++ runs, in what precision, and why.")
@file_argument()
@click.option("--backend", is_flag=True, help="Explain the speaker-embedding (CAM++) backend only.")
@click.option(
    "--platform",
    "platform",
    type=PlatformType("all"),
    default=None,
    help="Platform to explain, any case (default: all five with --backend; cuda plus the file's sections otherwise).",
)
@click.option("--probe", is_flag=True, help="Inspect this host (GPUs via nvidia-smi, packages, the plugin).")
@click.option(
    "--spk-backend",
    type=click.Choice(("auto", *BACKENDS)),
    default="auto",
    show_default=True,
    help="What `serve --spk-backend` would override the file with.",
)
@click.option(
    "--pipeline",
    type=PipelineType(),
    default=None,
    help="Pipeline of a file that neither names nor implies one (a vllm-omni registry name).",
)
@target_version_option("assume on the serving host")
@output_option(("text", "json"), help="text for people, json for programs (docs/json-output.md).")
@stdin_filename_option()
def explain(
    file: str | None,
    backend: bool,
    platform: str | None,
    probe: bool,
    spk_backend: str,
    pipeline: str | None,
    target_version: str | None,
    fmt: str,
    stdin_filename: str | None,
) -> int:
    """Explain where CAM++ runs, in what precision, which setting decided it (file:line) and how
    to switch; or, without --backend, the stages, devices and Code2Wav knobs per platform.

    FILE defaults to the project's deploy file (see `validate`; with several, name one), else the
    bundled MiniCPM-o 4.5 turn profile.
    """
    from omni_deploy.cli.file_options import load_deployment, read_one_input
    from omni_deploy.cli.settings import resolve
    from omni_deploy.explain.explanation import as_json, as_text, choose_platforms, explain, platform_origin
    from omni_deploy.speaker_backend import assumed_host, probe_host

    target = resolve(target_version).target_version
    deployment = load_deployment(read_one_input(file, stdin_filename), pipeline)
    host = probe_host() if probe else assumed_host(target)
    if probe:  # what the last server on this host reported (serve's run directories, or the variable)
        from omni_deploy.serve.rundir import default_runs_root
        from omni_deploy.speaker_backend import last_server_reports

        host.server_reports, host.server_reports_from = last_server_reports(default_runs_root())
    platforms = choose_platforms(deployment, platform, backend)
    override = backend_choice(spk_backend)
    origin = platform_origin(platform, backend)
    explanation = explain(deployment, platforms, backend, host, dict(os.environ), override, target, origin)
    click.echo(as_json(explanation) if fmt == "json" else as_text(explanation))
    return 0

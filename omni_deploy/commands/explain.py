"""`omni-deploy explain`: what a deploy file will do, per platform, before a GPU is touched."""

from __future__ import annotations

import os

import click

from omni_deploy.config.stage_schema import PLATFORMS
from omni_deploy.integration_env import BACKENDS, backend_choice
from omni_deploy.knowledge.versions import RELEASED


@click.command()
@click.argument("file", required=False, metavar="[FILE]")
@click.option("--backend", is_flag=True, help="Explain the speaker-embedding (CAM++) backend only.")
@click.option(
    "--platform",
    "platform",
    type=click.Choice(("all", *PLATFORMS)),
    default=None,
    help="Platform to explain (default: all five with --backend; cuda plus the file's sections otherwise).",
)
@click.option("--probe", is_flag=True, help="Inspect this host (GPUs via nvidia-smi, packages, the plugin).")
@click.option(
    "--spk-backend",
    type=click.Choice(("auto", *BACKENDS)),
    default="auto",
    show_default=True,
    help="What `serve --spk-backend` would override the file with.",
)
@click.option("--pipeline", default=None, help="Pipeline of a file that neither names nor implies one.")
@click.option(
    "--target-version",
    default=None,
    help=f"vllm-omni version of the serving host (default: installed, else {RELEASED}).",
)
@click.option("-o", "--output", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
def explain(
    file: str | None,
    backend: bool,
    platform: str | None,
    probe: bool,
    spk_backend: str,
    pipeline: str | None,
    target_version: str | None,
    fmt: str,
) -> int:
    """Explain FILE (default: the bundled MiniCPM-o 4.5 turn profile): where CAM++ runs, in what
    precision, which setting decided it (file:line), how to switch; or, without --backend, the
    stages, devices and Code2Wav knobs per platform.
    """
    from omni_deploy.bundled import deploy_file_name
    from omni_deploy.deployment import Deployment
    from omni_deploy.host import assumed_host, probe_host
    from omni_deploy.knowledge.versions import default_target_version
    from omni_deploy.resolve.explain import as_json, as_text, choose_platforms, explain

    deployment = Deployment.load(deploy_file_name(file), pipeline=pipeline)
    host = probe_host() if probe else assumed_host(target_version or default_target_version())
    platforms = choose_platforms(deployment, platform, backend)
    explanation = explain(deployment, platforms, backend, host, dict(os.environ), backend_choice(spk_backend))
    click.echo(as_json(explanation) if fmt == "json" else as_text(explanation))
    return 0

"""`omni-deploy explain`: what a deploy file will do, per platform, before a GPU is touched."""

from __future__ import annotations

import os
from typing import Any

import click

from omni_deploy.cli.file_options import file_argument
from omni_deploy.cli.options_from_dataclass import options_from, picked
from omni_deploy.cli.params import backend_choice
from omni_deploy.explain.args import ExplainArgs


@click.command(short_help="Where CAM++ runs, in what precision, and why.")
@file_argument()
@options_from(ExplainArgs)
def explain(file: str | None, **kwargs: Any) -> int:
    """Explain where CAM++ runs, in what precision, which setting decided it (file:line) and how
    to switch; or, without --backend, the stages, devices and Code2Wav knobs per platform.

    FILE defaults to the project's deploy file (see `validate`; with several, name one), else the
    bundled MiniCPM-o 4.5 turn profile.
    """
    from omni_deploy.cli.file_options import load_deployment, read_one_input
    from omni_deploy.cli.settings import resolve
    from omni_deploy.explain.explanation import as_json, as_text, choose_platforms, explain, platform_origin
    from omni_deploy.speaker_backend import assumed_host, probe_host

    args = ExplainArgs(**picked(ExplainArgs, kwargs))
    target = resolve(args.target_version).target_version
    deployment = load_deployment(read_one_input(file, args.stdin_filename), args.pipeline)
    host = probe_host() if args.probe else assumed_host(target)
    if args.probe:  # what the last server on this host reported (serve's run directories, or the variable)
        from omni_deploy.serve.rundir import default_runs_root
        from omni_deploy.speaker_backend import last_server_reports

        host.server_reports, host.server_reports_from = last_server_reports(default_runs_root())
    platforms = choose_platforms(deployment, args.platform, args.backend)
    override = backend_choice(args.spk_backend)
    origin = platform_origin(args.platform, args.backend)
    explanation = explain(
        deployment, platforms, args.backend, host, dict(os.environ), override, target, origin
    )
    click.echo(as_json(explanation) if args.fmt == "json" else as_text(explanation))
    return 0

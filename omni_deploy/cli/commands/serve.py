"""`omni-deploy serve`: preflight, render, then launch `vllm serve --omni` with the CUDA CAM++ default."""

from __future__ import annotations

from pathlib import Path

import click

from omni_deploy.cli.file_options import file_argument
from omni_deploy.cli.params import PORT, PlatformType, backend_choice, output_option, seconds
from omni_deploy.cli.settings import target_version_option
from omni_deploy.integrations.speaker_rules import BACKENDS
from omni_deploy.launch.options import LaunchOptions
from omni_deploy.serve.request import ServeRequest


def _echo(text: str, err: bool) -> None:
    click.echo(text, err=err)


def _env_pairs(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {value!r}", param_hint="--env")
        out[key] = val
    return out


class PassthroughCommand(click.Command):
    """A command whose arguments after the first `--` go elsewhere untouched, FILE or no FILE.

    Click would fill the optional FILE from the first word after `--` (`serve -- --port 9000`
    read `--port` as FILE); here they are set aside before Click parses the rest.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            args, ctx.meta["passthrough"] = args[:cut], tuple(args[cut + 1 :])
        else:
            ctx.meta["passthrough"] = ()
        return super().parse_args(ctx, args)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        return [*super().collect_usage_pieces(ctx), "[-- VLLM_ARGS...]"]


@click.command(cls=PassthroughCommand, short_help="Validate, render, then run vllm serve --omni.")
@file_argument()
@click.option("--model", default=None, help=f"Model path or hub id (default: {LaunchOptions.model}).")
@click.option(
    "--platform",
    type=PlatformType("auto"),
    default="auto",
    show_default=True,
    help="Platform to render for and start on, any case; auto: this host's accelerator (a dry run on a host without one assumes cuda and says so).",
)
@click.option("--host", default=LaunchOptions.host, show_default=True, help="Address the server listens on.")
@click.option(
    "--port",
    type=PORT,
    default=LaunchOptions.port,
    show_default=True,
    help="Port the server listens on.",
)
@click.option(
    "--served-model-name",
    default=None,
    help="Model name the API answers to (default: vllm's, the model path).",
)
@click.option(
    "--spk-backend",
    type=click.Choice(("auto", *BACKENDS)),
    default="auto",
    show_default=True,
    help="CAM++ backend; auto: what the deploy file says (cuda-torch on CUDA by default).",
)
@click.option(
    "--run-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Empty or new directory for this run's rendered config, launch record and log "
    "(default: a fresh one under ~/.cache/omni-deploy/runs; a dry run writes one only when given).",
)
@click.option(
    "--ready-timeout",
    type=seconds(low_open=True),
    default=ServeRequest.ready_timeout,
    show_default=True,
    help="Seconds to wait for /health (start-up takes minutes).",
)
@click.option(
    "--stop-grace",
    type=seconds(),
    default=ServeRequest.stop_grace,
    show_default=True,
    help="Seconds between TERM and KILL when stopping the server.",
)
@click.option("--no-wait", is_flag=True, help="Replace this process with the server (no supervision).")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the command, environment changes and decision; start nothing, write nothing (unless --run-dir).",
)
@click.option("--skip-preflight", is_flag=True, help="Skip the host checks (GPU, versions, model assets).")
@click.option(
    "--env", "env_pairs", multiple=True, metavar="KEY=VALUE", help="Extra environment for the server."
)
@target_version_option("validate against")
@output_option(
    ("text", "json"),
    help="With --dry-run: text, or json (docs/json-output.md). A running server's output is its log.",
)
def serve(
    file: str | None,
    model: str | None,
    platform: str,
    host: str,
    port: int,
    served_model_name: str | None,
    spk_backend: str,
    run_dir: Path | None,
    ready_timeout: float,
    stop_grace: float,
    no_wait: bool,
    dry_run: bool,
    skip_preflight: bool,
    env_pairs: tuple[str, ...],
    target_version: str | None,
    fmt: str,
) -> int:
    """Validate FILE, render it for the platform, and run `vllm serve MODEL --omni --deploy-config
    RENDERED` with the CUDA CAM++ path on.

    FILE defaults to the project's deploy file (see `validate`; with several, name one), else the
    bundled MiniCPM-o 4.5 turn profile. The project settings' ignore and strict apply to the check.

    Arguments after `--` go to `vllm serve` unchanged, with or without FILE (multi-node:
    --headless --stage-id N --omni-master-address A --omni-master-port P, --worker-backend ray
    --ray-address A).
    """
    from omni_deploy.cli.file_options import one_file_name
    from omni_deploy.cli.settings import resolve
    from omni_deploy.serve.session import run_serve

    if fmt == "json" and not dry_run:
        raise click.UsageError("-o json needs --dry-run (a running server's output is its log)")
    passthrough: tuple[str, ...] = click.get_current_context().meta.get("passthrough", ())
    extra_env, backend = _env_pairs(env_pairs), backend_choice(spk_backend)
    launch = LaunchOptions(
        model or LaunchOptions.model, platform, host, port, served_model_name, backend, extra_env, passthrough
    )
    settings = resolve(target_version)
    request = ServeRequest(
        one_file_name(file), platform, settings.target_version, launch, run_dir, dry_run, skip_preflight,
        no_wait, ready_timeout, stop_grace, fmt, settings.ignore, settings.strict, settings.target_from,
    )  # fmt: skip
    return run_serve(request, _echo)

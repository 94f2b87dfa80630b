"""`omni-deploy serve`: preflight, render, then launch `vllm serve --omni` with the CUDA CAM++ default."""

from __future__ import annotations

from typing import Any

import click

from omni_deploy.cli.file_options import file_argument
from omni_deploy.cli.options_from_dataclass import options_from, picked
from omni_deploy.cli.params import backend_choice
from omni_deploy.launch.options import LaunchOptions
from omni_deploy.serve.request import ServeArgs, ServeRequest


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
@options_from(ServeArgs)
def serve(file: str | None, **kwargs: Any) -> int:
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

    args = ServeArgs(**picked(ServeArgs, kwargs))
    if args.fmt == "json" and not args.dry_run:
        raise click.UsageError("-o json needs --dry-run (a running server's output is its log)")
    passthrough: tuple[str, ...] = click.get_current_context().meta.get("passthrough", ())
    extra_env, backend = _env_pairs(args.env_pairs), backend_choice(args.spk_backend)
    launch = LaunchOptions(
        model=args.model or LaunchOptions.model,
        platform=args.platform,
        host=args.host,
        port=args.port,
        served_model_name=args.served_model_name,
        spk_backend=backend,
        extra_env=extra_env,
        passthrough=passthrough,
    )
    settings = resolve(args.target_version)
    request = ServeRequest(
        file=one_file_name(file),
        platform=args.platform,
        target_version=settings.target_version,
        launch=launch,
        run_dir=args.run_dir,
        dry_run=args.dry_run,
        skip_preflight=args.skip_preflight,
        no_wait=args.no_wait,
        ready_timeout=args.ready_timeout,
        stop_grace=args.stop_grace,
        fmt=args.fmt,
        ignore=settings.ignore,
        strict=settings.strict,
        target_from=settings.target_from,
    )
    return run_serve(request, _echo)

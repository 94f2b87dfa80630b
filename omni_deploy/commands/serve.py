"""`omni-deploy serve`: preflight, render, then launch `vllm serve --omni` with the CUDA CAM++ default."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from omni_deploy.config.stage_schema import PLATFORMS
from omni_deploy.integration_env import BACKENDS, backend_choice


def _env_pairs(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {value!r}", param_hint="--env")
        out[key] = val
    return out


@click.command(context_settings={"ignore_unknown_options": False})
@click.argument("file", required=False, metavar="[FILE]")
@click.option("--model", default=None, help="Model path or hub id (default: openbmb/MiniCPM-o-4_5).")
@click.option("--platform", type=click.Choice(("auto", *PLATFORMS)), default="auto", show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(1, 65535), default=8091, show_default=True)
@click.option("--served-model-name", default=None)
@click.option(
    "--spk-backend",
    type=click.Choice(("auto", *BACKENDS)),
    default="auto",
    show_default=True,
    help="CAM++ backend; auto: what the deploy file says (cuda-torch on CUDA by default).",
)
@click.option(
    "--run-dir", type=click.Path(file_okay=False, path_type=Path), help="Empty or new directory for this run."
)
@click.option(
    "--ready-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=1800,
    show_default=True,
    help="Seconds to wait for /health (start-up takes minutes).",
)
@click.option(
    "--stop-grace",
    type=click.FloatRange(min=0),
    default=10,
    show_default=True,
    help="Seconds between TERM and KILL when stopping the server.",
)
@click.option("--no-wait", is_flag=True, help="Replace this process with the server (no supervision).")
@click.option(
    "--dry-run", is_flag=True, help="Print the command, environment changes and decision; start nothing."
)
@click.option("--skip-preflight", is_flag=True, help="Skip the host checks (GPU, versions, model assets).")
@click.option(
    "--env", "env_pairs", multiple=True, metavar="KEY=VALUE", help="Extra environment for the server."
)
@click.option(
    "--target-version", default=None, help="vllm-omni version to validate against (default: installed)."
)
@click.option("-o", "--output", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
@click.argument("vllm_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- VLLM_ARGS]...")
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
    vllm_args: tuple[str, ...],
) -> int:
    """Validate FILE (default: the bundled MiniCPM-o 4.5 turn profile), render it for the platform,
    and run `vllm serve MODEL --omni --deploy-config RENDERED` with the CUDA CAM++ path on.

    Arguments after `--` go to `vllm serve` unchanged (multi-node: --headless --stage-id N
    --omni-master-address A --omni-master-port P, --worker-backend ray --ray-address A).
    """
    from omni_deploy.commands.options import default_file_name
    from omni_deploy.config.render import to_yaml
    from omni_deploy.config.yaml_loader import display_path
    from omni_deploy.errors import Interrupted, ProcessExited, ReadinessTimeout
    from omni_deploy.host import detect_platform, probe_host
    from omni_deploy.knowledge.versions import default_target_version
    from omni_deploy.resolve.speaker import decide
    from omni_deploy.serve.plan import (
        DEFAULT_MODEL,
        LaunchOptions,
        apply_speaker_override,
        build_plan,
        check_passthrough,
        plan_record,
    )
    from omni_deploy.serve.preflight import run_preflight
    from omni_deploy.serve.redact import redact_env
    from omni_deploy.serve.rundir import add_to_record, make_run_dir, write_new, write_record
    from omni_deploy.serve.supervise import Supervisor, local_url
    from omni_deploy.validate.context import Options
    from omni_deploy.validate.report import text as report_text
    from omni_deploy.validate.runner import validate_file

    name = default_file_name(file)
    target = target_version or default_target_version()
    chosen = (
        platform
        if platform != "auto"
        else (detect_platform() or ("cuda" if skip_preflight or dry_run else None))
    )
    if chosen is None:
        raise click.ClickException(
            "no accelerator found (nvidia-smi, rocm-smi, npu-smi, xpu-smi); pass --platform"
        )

    report = validate_file(name, Options(platforms=(chosen,), target_version=target))
    problems = [f for f in report.findings if f.severity != "info"]
    if problems:
        click.echo(report_text([report]), err=True)
    if not report.valid:
        click.echo("omni-deploy: validation failed; nothing started", err=True)
        return 1

    from omni_deploy.config.nodes import Origin, to_plain

    # Validation loaded the file and applied the platform already: use what it saw.
    deployment = report.deployment
    assert deployment is not None
    applied = deployment.on(chosen)
    override = backend_choice(spk_backend)
    host_caps = probe_host()
    if skip_preflight or dry_run:
        host_caps.probed = False  # decide for the intended serving host, not for this one
        host_caps.torch = host_caps.onnx = host_caps.plugin_registered = True
    decision = decide(
        chosen,
        deployment.pipeline,
        deployment.code2wav_extra(),
        deployment.code2wav_extra_path,
        dict(os.environ),
        host_caps,
        override,
    )

    # The rendered config carries the override too, so vllm-omni and the plugin agree.
    notes = apply_speaker_override(
        applied.config,
        deployment.code2wav_extra_on(chosen),
        override,
        Origin("--spk-backend", 0, 0, "override"),
    )
    for warning in decision.warnings:
        click.echo(f"omni-deploy: warning: {warning}", err=True)

    stage_ids = {to_plain(s.get("stage_id")) for s in applied.stages}
    check_passthrough(tuple(a for a in vllm_args if a != "--"), {i for i in stage_ids if isinstance(i, int)})
    options = LaunchOptions(
        model=model or DEFAULT_MODEL,
        platform=chosen,
        host=host,
        port=port,
        served_model_name=served_model_name,
        spk_backend=override,
        extra_env=_env_pairs(env_pairs),
        passthrough=tuple(a for a in vllm_args if a != "--"),
    )

    preflight = run_preflight(options.model, chosen, decision.speaker_backend)
    directory = make_run_dir(run_dir)
    config_path = directory / "deploy.yaml"
    header = (
        f"# Rendered by omni-deploy serve from {display_path(deployment.top)} for platform {chosen}\n"
        + "".join(f"# {n}\n" for n in notes)
    )
    write_new(config_path, to_yaml(applied.config, header))
    plan = build_plan(options, str(config_path), decision, dict(os.environ))
    refused = [] if skip_preflight else preflight.refusals
    record: dict[str, Any] = plan_record(
        plan,
        {
            "deploy_file": str(deployment.top),
            "platform": chosen,
            "target_version": target,
            "versions": preflight.versions,
            "dry_run": dry_run,
            "preflight": {
                "skipped": skip_preflight,
                "refusals": [r.__dict__ for r in preflight.refusals],
                "notes": preflight.notes,
            },
            "notes": notes,
            "run_dir": str(directory),
        },
    )
    write_record(directory, record)

    if dry_run:
        if fmt == "json":
            out = {
                "argv": plan.argv,
                "env": redact_env(plan.env_changes),
                "config": str(config_path),
                "speaker_backend": decision.speaker_backend,
                "preflight_refusals": [r.message for r in preflight.refusals],
            }
            click.echo(json.dumps(out, indent=2))
        else:
            click.echo(plan.shell())
            for key, value in redact_env(plan.env_changes).items():
                click.echo(f"  env {key}={value}" if value is not None else f"  env unset {key}")
            click.echo(f"config: {config_path}")
            click.echo(f"speaker backend: {decision.speaker_backend} [{decision.provider}]")
            for note in notes:
                click.echo(f"note: {note}")
            for r in preflight.refusals:
                click.echo(f"preflight would refuse: {r.message}" + (f" ({r.hint})" if r.hint else ""))
        return 0

    if skip_preflight:
        click.echo(
            "omni-deploy: preflight skipped (GPU, installed versions, model assets not checked)", err=True
        )
    if refused:
        for r in refused:
            click.echo(f"omni-deploy: preflight: {r.message}" + (f" ({r.hint})" if r.hint else ""), err=True)
        click.echo(f"omni-deploy: nothing started; run record in {directory}", err=True)
        return 1
    env = plan.child_env(dict(os.environ))
    click.echo(f"omni-deploy: {plan.shell()}")
    click.echo(
        f"omni-deploy: speaker backend {decision.speaker_backend} [{decision.provider}]; run dir {directory}"
    )
    if no_wait:
        sys.stdout.flush()
        try:
            os.execvpe(plan.argv[0], plan.argv, env)
        except OSError as exc:
            raise click.ClickException(f"cannot run {plan.argv[0]}: {exc}") from None
    supervisor = Supervisor(
        plan.argv, env, directory / "server.log", local_url(host, port), ready_timeout, stop_grace
    )
    code = supervisor.run()
    add_to_record(
        directory,
        {
            "exit": {
                "server_code": code,
                "signals": supervisor.forwarded,
                "ready_timeout": supervisor.timed_out,
            }
        },
    )
    if supervisor.timed_out:
        raise ReadinessTimeout(
            f"the server was not ready after {ready_timeout:g} s; run record in {directory}"
        )
    if supervisor.forwarded:
        raise Interrupted(
            f"interrupted: {', '.join(supervisor.forwarded)} forwarded to the server, which exited with code {code}"
        )
    if code != 0:
        raise ProcessExited("the server", code)
    return 0

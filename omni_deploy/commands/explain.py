"""`omni-deploy explain`: what a deploy file will do, per platform, before a GPU is touched."""

from __future__ import annotations

import json
import os
from typing import Any

import click

from omni_deploy.config.stage_schema import PLATFORMS
from omni_deploy.integration_env import BACKENDS, backend_choice
from omni_deploy.knowledge.versions import RELEASED


def _gib(value: Any) -> str:
    return f"{value / 1024**3:.2f} GiB" if isinstance(value, int) and not isinstance(value, bool) else "-"


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


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
    from omni_deploy.commands.options import default_file_name
    from omni_deploy.config.yaml_loader import display_path
    from omni_deploy.deployment import Deployment
    from omni_deploy.host import assumed_host, probe_host
    from omni_deploy.knowledge.versions import default_target_version
    from omni_deploy.resolve.overview import overview
    from omni_deploy.resolve.speaker import decide

    name = default_file_name(file)
    deployment = Deployment.load(name, pipeline=pipeline)
    info = deployment.pipeline
    extra, extra_path = deployment.code2wav_extra(), deployment.code2wav_extra_path
    target = target_version or default_target_version()
    host = probe_host() if probe else assumed_host(target)
    platforms: tuple[str, ...]
    if platform == "all" or (platform is None and backend):
        platforms = PLATFORMS
    elif platform is not None:
        platforms = (platform,)
    else:
        platforms = deployment.default_platforms()
    override = backend_choice(spk_backend)
    decisions = {p: decide(p, info, extra, extra_path, dict(os.environ), host, override) for p in platforms}
    result: dict[str, Any] = {"file": name, "pipeline": info.name, "pipeline_source": info.source}
    if backend:
        result["platforms"] = {p: d.as_dict() for p, d in decisions.items()}
    else:
        result["platforms"] = {
            p: overview(deployment.on(p), info, extra, decisions[p].speaker_backend) for p in platforms
        }
    if probe or not backend:
        result["host"] = host.as_dict()
    if fmt == "json":
        click.echo(json.dumps(result, indent=2, default=str))
        return 0
    click.echo(f"file: {display_path(deployment.top)}")
    click.echo(f"pipeline: {info.name or 'unknown'} ({info.source})")
    if probe:
        gpus = ", ".join(host.gpus) or "none"
        click.echo(
            f"host (probed): GPUs {gpus} [{host.gpu_query}]; torch {'yes' if host.torch else 'no'}, onnx "
            f"{'yes' if host.onnx else 'no'}, onnxruntime {'yes' if host.onnxruntime else 'no'}, tensorrt "
            f"{'yes' if host.tensorrt else 'no'}; vllm {host.vllm or 'not installed'}, vllm-omni "
            f"{host.vllm_omni or 'not installed'}"
            + ("" if host.versions_match is not False else " (major.minor differ!)")
            + f"; omni-deploy plugin {'registered' if host.plugin_registered else 'not registered'}"
        )
    else:
        click.echo(
            f"host: assumed serving host with vllm-omni {host.vllm_omni} and omni-deploy[speaker] (--probe checks this one)"
        )
    if backend:
        for p, d in decisions.items():
            _print_decision(p, d)
    else:
        for p in platforms:
            _print_overview(p, result["platforms"][p])
    return 0


def _print_decision(platform: str, d: Any) -> None:
    click.echo(f"\n{platform}: {d.speaker_backend}  [{d.provider}]")
    if d.weights_dtype:
        tf32 = {True: "on", False: "off", None: "n/a"}[d.matmul_tf32]
        click.echo(
            f"  precision: weights {d.weights_dtype}, inputs {d.inputs_dtype}, matmul TF32 {tf32}"
            + (f", cuDNN TF32: {d.cudnn_tf32}" if d.cudnn_tf32 else "")
        )
    click.echo("  decided by:")
    for r in d.reasons:
        click.echo(f"    {r.setting} = {json.dumps(r.value)}  ({r.origin})")
    if d.fallbacks:
        click.echo("  to switch:")
        for f in d.fallbacks:
            click.echo(f"    {f.backend}: {f.how}")
    for w in d.warnings:
        click.echo(f"  warning: {w}")


def _print_overview(platform: str, data: dict[str, Any]) -> None:
    click.echo(f"\n== {platform} (model runner {data['model_runner']})")
    header = f"  {'stage':<5} {'role':<9} {'devices':<8} {'seqs':>5} {'max_len':>8} {'batched':>8} {'KV budget':>10} {'gpu mem':>8}"
    click.echo(header)
    for s in data["stages"]:
        click.echo(
            f"  {_cell(s['stage_id']):<5} {s['role']:<9} {_cell(s['devices']):<8} {_cell(s['max_num_seqs']):>5} "
            f"{_cell(s['max_model_len']):>8} {_cell(s['max_num_batched_tokens']):>8} "
            f"{_gib(s['kv_cache_memory_bytes']):>10} {_cell(s['gpu_memory_utilization']):>8}"
        )
    for device, d in data["devices"].items():
        kv = f", KV budgets {_gib(d['kv_cache_bytes'])}" if d["kv_cache_bytes"] else ""
        click.echo(
            f"  device {device}: stages {d['stages']} ask for {d['gpu_memory_utilization']:g} of its memory{kv}"
        )
    if data["code2wav"] is not None:
        knobs = ", ".join(f"{k}={json.dumps(v)}" for k, v in data["code2wav"].items() if v is not None)
        click.echo(f"  code2wav: {knobs}")

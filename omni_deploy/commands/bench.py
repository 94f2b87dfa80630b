"""`omni-deploy bench`: the write-up's serving benchmark protocol as commands."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import click


def _ints(value: str) -> tuple[int, ...]:
    try:
        out = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None
    if not out or any(v < 1 for v in out):
        raise click.BadParameter("concurrency values must be positive integers")
    return out


def sweep_options(f: Any) -> Any:
    options = [
        click.option("--model", required=True, help="Served model name (as the server answers it)."),
        click.option(
            "--dataset-path",
            required=True,
            type=click.Path(exists=True, file_okay=False, path_type=Path),
            help="Seed-TTS input directory (meta.lst and reference WAVs).",
        ),
        click.option("--tokenizer", default="openbmb/MiniCPM-o-4_5", show_default=True),
        click.option("--concurrency", default="1,4,8,16,32", show_default=True),
        click.option("--prompts", type=click.IntRange(min=1), default=64, show_default=True),
        click.option("--rounds", type=click.IntRange(min=1), default=2, show_default=True),
        click.option("--discard", type=click.IntRange(min=0), default=1, show_default=True),
        click.option(
            "--warmup", type=click.IntRange(min=0), default=0, show_default=True, help="Warm-up requests."
        ),
        click.option("--warmup-path", type=click.Path(exists=True, file_okay=False, path_type=Path)),
        click.option("--warmup-concurrency", type=click.IntRange(min=1), default=16, show_default=True),
        click.option(
            "--extra-body",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="Sampling settings of the three stages (default: the write-up's).",
        ),
        click.option(
            "--result-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=Path("bench-results"),
            show_default=True,
        ),
        click.option("--ready-timeout", type=click.FloatRange(min=0), default=1800, show_default=True),
        click.option("--dry-run", is_flag=True, help="Print the commands; run nothing."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _sweep(base_url: str, kw: dict[str, Any], order: str) -> Any:
    from omni_deploy.bench.protocol import SweepOptions, load_extra_body

    return SweepOptions(
        base_url=base_url.rstrip("/"),
        model=kw["model"],
        dataset_path=kw["dataset_path"],
        tokenizer=kw["tokenizer"],
        concurrency=_ints(kw["concurrency"]),
        prompts=kw["prompts"],
        rounds=kw["rounds"],
        discard=kw["discard"],
        warmup=kw["warmup"],
        warmup_path=kw["warmup_path"],
        warmup_concurrency=kw["warmup_concurrency"],
        order=order,
        extra_body=load_extra_body(kw["extra_body"]),
        result_dir=kw["result_dir"],
        ready_check_timeout=int(kw["ready_timeout"]),
    )


@click.group()
def bench() -> None:
    """Serving benchmark: sweeps with `vllm bench serve --omni`, reports, A/B comparisons."""


@bench.command("run")
@click.option("--base-url", required=True, help="Server URL, e.g. http://127.0.0.1:8091.")
@click.option("--order", type=click.Choice(("forward", "reverse")), default="forward", show_default=True)
@sweep_options
def run(base_url: str, order: str, **kw: Any) -> int:
    """Run warm-up, discarded and measured rounds per concurrency against a running server."""
    from omni_deploy.bench.protocol import plan_sweep
    from omni_deploy.bench.runner import stderr_say, sweep_server

    options = _sweep(base_url, kw, order)
    steps = plan_sweep(options)
    if kw["dry_run"]:
        for step in steps:
            click.echo(shlex.join(step.argv))
        return 0
    sweep_server(steps, options.base_url, kw["ready_timeout"], options.result_dir, stderr_say)
    return 0


@bench.command("report")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--baseline", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), help="Write OUT.png or OUT.svg."
)
@click.option(
    "-o",
    "--output",
    "fmt",
    type=click.Choice(("text", "json", "markdown")),
    default="text",
    show_default=True,
)
def report(directory: Path, baseline: Path | None, plot_path: Path | None, fmt: str) -> int:
    """Summarise saved result files: audio throughput, TTFA p50/p95, RTF, req/s, per concurrency."""
    from omni_deploy.bench.report import aggregate, as_json, as_markdown, as_text, changes
    from omni_deploy.bench.results import read_dir

    rows = aggregate(read_dir(directory), "candidate")
    base_rows = aggregate(read_dir(baseline), "baseline") if baseline else []
    if not rows:
        raise click.ClickException(f"{directory}: no measured rounds found")
    diffs = changes(rows, base_rows) if base_rows else []
    render = {"text": as_text, "json": as_json, "markdown": as_markdown}[fmt]
    click.echo(render(rows + base_rows, diffs))
    if plot_path is not None:
        if plot_path.suffix not in (".png", ".svg"):
            raise click.BadParameter("use a .png or .svg file", param_hint="--plot")
        if plot_path.exists():
            raise click.ClickException(f"{plot_path} exists; not overwritten")
        try:
            from omni_deploy.bench.plot import plot
        except ImportError:
            raise click.ClickException("plots need matplotlib: pip install 'omni-deploy[plot]'") from None
        plot(rows + base_rows, plot_path)
    return 1 if any(r.flagged for r in rows + base_rows) else 0


@bench.command("ab")
@click.argument("file")
@click.option(
    "--a", "a_pairs", multiple=True, required=True, metavar="KEY=VALUE", help="serve options of A (baseline)."
)
@click.option("--b", "b_pairs", multiple=True, required=True, metavar="KEY=VALUE", help="serve options of B.")
@click.option(
    "--model-path", "model_path", default="openbmb/MiniCPM-o-4_5", show_default=True, help="Model to serve."
)
@click.option("--port", type=click.IntRange(1, 65535), default=8091, show_default=True)
@sweep_options
def ab(
    file: str, a_pairs: tuple[str, ...], b_pairs: tuple[str, ...], model_path: str, port: int, **kw: Any
) -> int:
    """Compare two server set-ups: A, B, B, A starts... (each twice, the second in reverse order).

    Example: --a spk-backend=cpu-onnxruntime --b spk-backend=cuda-torch
    """
    from omni_deploy.bench.ab import describe, parse_overrides, plan_ab, run_ab
    from omni_deploy.bench.runner import stderr_say
    from omni_deploy.serve.supervise import local_url

    try:
        a, b = parse_overrides(a_pairs), parse_overrides(b_pairs)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    sweep = _sweep(local_url("127.0.0.1", port), kw, "forward")
    serve_common = ["--served-model-name", kw["model"]]
    starts = plan_ab(
        file, model_path, port, [*serve_common, *a], [*serve_common, *b], sweep, kw["result_dir"] / "runs"
    )
    if kw["dry_run"]:
        click.echo(describe(starts))
        return 0
    click.echo(run_ab(starts, sweep.base_url, kw["ready_timeout"], kw["result_dir"], stderr_say))
    return 0

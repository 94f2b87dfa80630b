"""`omni-deploy bench`: the write-up's serving benchmark protocol as commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from omni_deploy.bench.inputs_args import InputsArgs
from omni_deploy.bench.report_args import ReportArgs
from omni_deploy.bench.sweep_args import MAX_CONCURRENCY, AbArgs, RunArgs, SweepArgs
from omni_deploy.cli.options_from_dataclass import options_from, picked
from omni_deploy.cli.params import number_list, parse_count
from omni_deploy.common.install_hint import install_hint


def _ints(value: str) -> tuple[int, ...]:
    return number_list(
        value, lambda v: parse_count(v, 1, MAX_CONCURRENCY), "concurrency levels", "--concurrency"
    )


def _renamed(value: Any, old: str, new: str) -> None:
    if value is not None:
        raise click.UsageError(f"{old} is now {new} (the model to serve, as in serve and k8s)")


def _sweep(base_url: str, args: SweepArgs, order: str) -> Any:
    from omni_deploy.bench.inputs import check_folder
    from omni_deploy.bench.protocol import SweepOptions, load_extra_body

    extra_body = load_extra_body(args.extra_body)
    # Before anything runs (also for --dry-run: it says what the run would do): requests to send.
    check_folder(args.dataset_path)
    if args.warmup > 0 and args.warmup_path is not None:
        check_folder(args.warmup_path, option="--warmup-path")
    return SweepOptions(
        base_url=base_url.rstrip("/"),
        model=args.served_model_name or args.model,  # the name requests carry
        dataset_path=args.dataset_path,
        tokenizer=args.tokenizer or args.model,
        concurrency=_ints(args.concurrency),
        prompts=args.prompts,
        rounds=args.rounds,
        discard=args.discard,
        warmup=args.warmup,
        warmup_path=args.warmup_path,
        warmup_concurrency=args.warmup_concurrency,
        order=order,
        extra_body=extra_body,
        result_dir=args.result_dir,
        ready_check_timeout=int(args.ready_timeout),
    )


@click.group(short_help="Run, report and compare serving benchmarks.")
def bench() -> None:
    """Serving benchmark: inputs laid out, sweeps with `vllm bench serve --omni`, reports, A/B comparisons."""


@bench.command("run", short_help="Sweep concurrencies against a running server.")
@options_from(RunArgs)
@options_from(SweepArgs)  # the options bench run and bench ab share
def run(**kw: Any) -> int:
    """Run warm-up, discarded and measured rounds per concurrency against a running server."""
    from omni_deploy.bench.protocol import plan_sweep
    from omni_deploy.bench.runner import stderr_say, steps_json, sweep_server, timed
    from omni_deploy.common.output.escape import shell_join
    from omni_deploy.common.redact import redact_urls

    own = RunArgs(**picked(RunArgs, kw))
    args = SweepArgs(**picked(SweepArgs, kw))
    options = _sweep(own.base_url, args, own.order)
    steps = plan_sweep(options)
    as_json = args.fmt == "json"
    if args.dry_run and not as_json:
        for step in steps:
            click.echo(shell_join(redact_urls(step.argv)))
        return 0
    done: list[Any] = []
    if not args.dry_run:
        say = timed(stderr_say)
        done = sweep_server(steps, options.base_url, args.ready_timeout, options.result_dir, say, as_json)
    if as_json:
        click.echo(steps_json(steps, options.result_dir, done, args.dry_run))
    return 0


@bench.command("inputs", short_help="Lay out the Seed-TTS inputs from an evaluation checkout.")
@options_from(InputsArgs)
def inputs(**kwargs: Any) -> int:
    """Lay out a Seed-TTS evaluation checkout's meta.lst rows and WAVs into OUT/evaluation/ and
    OUT/warmup/, as `bench run --dataset-path` and `--warmup-path` read them.

    Deterministic: the rows are taken in meta.lst's order, so the same checkout gives the same
    folders. Each folder gets a manifest.json with every file's SHA-256, which `bench run` checks.
    Everything is checked before anything is written.
    """
    from omni_deploy.bench.inputs import lay_out, plan_layout

    args = InputsArgs(**picked(InputsArgs, kwargs))
    # The protocol's requests are English.
    plan = plan_layout(args.checkout, "en", args.warmup, args.evaluation)
    written = lay_out(plan, args.out)
    for name, folder in written.items():
        click.echo(f"{name}: {len(plan.subsets[name])} request(s) in {folder} ({folder / 'manifest.json'})")
    warm = f" --warmup {args.warmup} --warmup-path {written['warmup']}" if "warmup" in written else ""
    click.echo(f"next: omni-deploy bench run --base-url URL --dataset-path {written['evaluation']}{warm}")
    return 0


@bench.command("report", short_help="Summarise saved rounds; compare with a baseline.")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@options_from(ReportArgs)
def report(directory: Path, **kwargs: Any) -> int:
    """Summarise saved result files: audio throughput, TTFA p50/p95, RTF, req/s, per concurrency."""
    from omni_deploy.bench.report import (
        aggregate,
        as_json,
        as_markdown,
        as_text,
        changes,
        skipped_lines,
        source_names,
    )
    from omni_deploy.bench.results import read_dir

    args = ReportArgs(**picked(ReportArgs, kwargs))
    if args.plot_path is not None:  # refused before any work, so a bad --plot never costs a report
        _check_plot_path(args.plot_path)
    name, base_name = source_names(directory, args.baseline)
    found = read_dir(directory)  # ResultError (no such directory, too many files): exit 1 via cli
    base = read_dir(args.baseline) if args.baseline else None
    skipped = found.skipped + (base.skipped if base else [])
    for line in skipped_lines(skipped):
        click.echo(f"omni-deploy: {line}", err=True)
    rows = aggregate(found.rounds, name)
    if not rows:
        raise click.ClickException(f"{directory}: no valid measured rounds found")
    base_rows = aggregate(base.rounds, base_name or "baseline", baseline=True) if base else []
    if base is not None and not base_rows:
        raise click.ClickException(
            f"--baseline {args.baseline}: no valid measured rounds found; nothing to compare"
        )
    diffs = changes(rows, base_rows) if base_rows else []
    if args.fmt == "json":
        click.echo(as_json(rows + base_rows, diffs, skipped))
    else:
        click.echo({"text": as_text, "markdown": as_markdown}[args.fmt](rows + base_rows, diffs))
    if args.plot_path is not None:
        from omni_deploy.bench.plot import plot

        try:
            plot(rows + base_rows, args.plot_path)
        except (OSError, ImportError) as exc:
            raise click.ClickException(f"cannot write the plot {args.plot_path}: {exc}") from None
    return 1 if any(r.flagged for r in rows + base_rows) else 0


def _check_plot_path(plot_path: Path) -> None:
    import importlib.util

    if plot_path.suffix not in (".png", ".svg"):
        raise click.BadParameter("use a .png or .svg file", param_hint="--plot")
    if plot_path.exists():
        raise click.BadParameter(f"{plot_path} exists; not overwritten", param_hint="--plot")
    if importlib.util.find_spec("matplotlib") is None:
        raise click.ClickException(f"plots need matplotlib: {install_hint('plot')}")


@bench.command("ab", short_help="Compare two server set-ups, each started twice.")
@click.argument("file")
@options_from(AbArgs)
# A removed option that only says what replaced it: no value, so no field.
@click.option(
    "--model-path",
    hidden=True,
    expose_value=False,
    callback=lambda _ctx, _param, value: _renamed(value, "--model-path", "--model"),
)
@options_from(SweepArgs)  # the options bench run and bench ab share
def ab(file: str, **kw: Any) -> int:
    """Compare two server set-ups: A, B, B, A starts... (each twice, the second in reverse order).

    Example: --a spk-backend=cpu-onnxruntime --b spk-backend=cuda-torch
    """
    from omni_deploy.bench.ab import ab_json, describe, parse_overrides, plan_ab, run_ab
    from omni_deploy.bench.runner import stderr_say, timed
    from omni_deploy.common.probes import local_url
    from omni_deploy.common.redact import register, secret_values

    own = AbArgs(**picked(AbArgs, kw))
    try:
        a, b = parse_overrides(own.a_pairs), parse_overrides(own.b_pairs)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    register(secret_values([*a, *b], {}))  # env=HF_TOKEN=... is never printed, also not by accident
    args = SweepArgs(**picked(SweepArgs, kw))
    sweep = _sweep(local_url("127.0.0.1", own.port), args, "forward")
    served = args.served_model_name
    serve_common = ["--served-model-name", served] if served else []
    starts = plan_ab(
        file, args.model, own.port, [*serve_common, *a], [*serve_common, *b], sweep, args.result_dir / "runs"
    )
    if args.dry_run:
        click.echo(ab_json(starts, args.result_dir) if args.fmt == "json" else describe(starts))
        return 0
    if args.fmt == "json":
        raise click.UsageError(
            "bench ab -o json needs --dry-run; the comparison itself: bench report -o json"
        )
    click.echo(
        run_ab(starts, sweep.base_url, args.ready_timeout, args.result_dir, timed(stderr_say), sweep.model)
    )
    return 0

"""`omni-deploy spk`: the CAM++ speaker encoder's tools (stand-in builder, parity, speed)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from omni_deploy.cli.options_from_dataclass import options_from, picked
from omni_deploy.cli.params import number_list, parse_count, parse_real
from omni_deploy.common.install_hint import install_hint
from omni_deploy.speaker.tool_args import ParityArgs, SpkBenchArgs, StandinArgs


def _float_list(value: str) -> tuple[float, ...]:
    # reference lengths in seconds: finite, more than 0, at most ten minutes
    return number_list(value, lambda v: parse_real(v, 0.0, 600.0, low_open=True), "seconds", "--seconds")


def _int_list(value: str) -> tuple[int, ...]:
    return number_list(value, lambda v: parse_count(v, 1, 1024), "batch sizes", "--batch")


def _speaker_imports() -> None:
    missing = []
    for name in ("torch", "onnx", "onnxruntime", "numpy"):
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise click.ClickException(f"the speaker tools need {', '.join(missing)}: {install_hint('speaker')}")


def _device(name: str) -> str:
    import re

    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    match = re.fullmatch(r"cpu|cuda(?::([0-9]{1,3}))?", name)
    if match is None:  # torch.device() would raise an internal error on anything else
        raise click.BadParameter(f"{name!r}: use cuda, cuda:N, cpu or auto", param_hint="--device")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise click.ClickException("CUDA is not available in this process; use --device cpu")
    if match.group(1) is not None and int(match.group(1)) >= torch.cuda.device_count():
        raise click.ClickException(f"{name}: this process sees {torch.cuda.device_count()} CUDA device(s)")
    return name


def _guard(fn: Any, *args: Any, **kwargs: Any) -> Any:
    # SpeakerModelError and AudioError reach cli.py's exit-code map; a ValueError here is bad input too.
    try:
        return fn(*args, **kwargs)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


@click.group(short_help="CAM++ tools: a stand-in model, parity, speed.")
def spk() -> None:
    """CAM++ speaker encoder: build a stand-in model, check parity with ONNX Runtime, measure speed."""


@spk.command("make-standin", short_help="Export a stand-in campplus.onnx (random weights).")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@options_from(StandinArgs)
def make_standin(out: Path, **kwargs: Any) -> int:
    """Export a STAND-IN campplus.onnx: CAM++'s real structure with deterministic random weights.

    Its embeddings mean nothing; it exists to test and time the loader and the encoder where the
    released weights are not available.
    """
    args = StandinArgs(**picked(StandinArgs, kwargs))
    _speaker_imports()
    from omni_deploy.speaker.standin import STANDIN_NOTE, export_standin

    if os.path.lexists(out) and not args.force:
        raise click.BadParameter(f"{out} exists; pass --force to replace it", param_hint="OUT")
    if not out.parent.is_dir():
        raise click.BadParameter(f"no such directory: {out.parent}", param_hint="OUT")
    try:
        summary = export_standin(out, seed=args.seed, replace=args.force)
    except FileExistsError:
        raise click.BadParameter(f"{out} exists; pass --force to replace it", param_hint="OUT") from None
    except OSError as exc:
        raise click.ClickException(f"cannot write {out}: {exc.strerror or exc}") from None
    if args.fmt == "json":
        from dataclasses import asdict

        from omni_deploy.common.output.json_doc import dumps

        click.echo(dumps({"path": str(out), "seed": args.seed, "note": STANDIN_NOTE, **asdict(summary)}))
    else:
        click.echo(f"wrote {out}: {STANDIN_NOTE}, seed {args.seed}")
        click.echo(
            f"graph: {summary.nodes} nodes, {summary.batchnorm_nodes} BatchNormalization, "
            f"{summary.avgpool_nodes} AveragePool, {summary.initializers} initializers, "
            f"{summary.size_bytes / 1e6:.1f} MB"
        )
    if (summary.batchnorm_nodes, summary.avgpool_nodes) != (56, 52):
        raise click.ClickException(
            "the export does not have the structure of the real file (56 BN, 52 AvgPool)"
        )
    return 0


@spk.command(short_help="Our CAM++ against ONNX Runtime on the same fbank.")
@options_from(ParityArgs)
@click.argument("wavs", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
def parity(wavs: tuple[Path, ...], **kwargs: Any) -> int:
    """Compare our embeddings with ONNX Runtime on the CPU, on the same fbank features.

    Prints the cosine similarity and the largest absolute difference of the L2-normalised
    embeddings per reference and overall; exits 1 when any cosine is below --min-cosine.
    """
    args = ParityArgs(**picked(ParityArgs, kwargs))
    _speaker_imports()
    from omni_deploy.speaker.inputs import read_wav
    from omni_deploy.speaker.inputs import synthetic as make_synthetic
    from omni_deploy.speaker.parity import run_parity, summary

    if wavs and args.synthetic:
        raise click.UsageError("give WAV files or --synthetic N, not both")
    refs = _guard(lambda: [read_wav(w) for w in wavs]) if wavs else make_synthetic(args.synthetic or 8)
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.tf32]
    from omni_deploy.common.output.progress import progress

    target = _device(args.device)
    with progress(f"parity of {len(refs)} reference(s) on {target} against ONNX Runtime"):
        cases = _guard(run_parity, args.onnx_path, refs, target, modes)
    result = summary(cases)
    worst = min(c.cosine for c in cases)
    if args.fmt == "json":
        from omni_deploy.common.output.json_doc import dumps

        click.echo(dumps(result))
    else:
        from omni_deploy.common.output.tables import Column, to_text

        columns = [
            Column("reference"),
            Column("frames", numeric=True),
            Column("tf32"),
            Column("cosine", numeric=True),
            Column("max |diff|", numeric=True),
        ]
        rows = [
            [c.name, c.frames, "on" if c.tf32 else "off", f"{c.cosine:.9f}", f"{c.max_abs_diff:.3e}"]
            for c in cases
        ]
        click.echo(to_text(columns, rows))
        for key in ("tf32_off", "tf32_on"):
            if key in result:
                s = result[key]
                click.echo(
                    f"{key}: min cosine {s['min_cosine']:.9f}, max |diff| {s['max_abs_diff']:.3e}, {s['cases']} cases"
                )
    if worst < args.min_cosine:
        click.echo(f"FAIL: min cosine {worst:.9f} is below {args.min_cosine}", err=True)
        return 1
    return 0


@spk.command(short_help="CAM++ latency: ONNX Runtime, eager torch and ours.")
@options_from(SpkBenchArgs)
def bench(**kwargs: Any) -> int:
    """Time CAM++ side by side: ONNX Runtime CPU (1 thread, all cores), eager torch, and ours."""
    args = SpkBenchArgs(**picked(SpkBenchArgs, kwargs))
    _speaker_imports()
    from omni_deploy.common.output.progress import progress
    from omni_deploy.speaker.bench import as_json, run_bench

    target = _device(args.device)
    with progress(f"timing CAM++ on {target}"):
        rows = _guard(
            run_bench,
            args.onnx_path,
            device=target,
            seconds=_float_list(args.seconds),
            batches=_int_list(args.batches),
            mixed=args.mixed,
            repeats=max(1, args.repeats),
            allow_tf32=args.tf32,
            progress=not sys.stderr.isatty(),  # a terminal has the live line instead
        )
    if args.fmt == "json":
        from omni_deploy.common.output.json_doc import dumps

        click.echo(dumps({"rows": as_json(rows)}))
    else:
        click.echo(_bench_table(as_json(rows)))
    return 0


def _bench_table(rows: list[dict[str, Any]]) -> str:
    """One row per case and backend; the last column says how many times slower than ours it is."""
    from omni_deploy.common.output.tables import Column, to_text

    ours = {r["case"]: r["per_ref_ms"] for r in rows if r["backend"] == "ours"}
    columns = [
        Column("case"),
        Column("backend"),
        Column("batch", numeric=True),
        Column("median ms/call", numeric=True),
        Column("p95 ms/call", numeric=True),
        Column("ms/reference", numeric=True),
        Column("time vs ours", numeric=True),
    ]
    table = []
    for r in rows:
        base = ours.get(r["case"])
        ratio = f"{r['per_ref_ms'] / base:.1f}x" if base else "-"
        table.append(
            [
                r["case"],
                r["backend"],
                r["batch"],
                f"{r['median_ms']:.3f}",
                f"{r['p95_ms']:.3f}",
                f"{r['per_ref_ms']:.3f}",
                ratio,
            ]
        )
    return to_text(columns, table)

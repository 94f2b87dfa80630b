"""`omni-deploy spk`: the CAM++ speaker encoder's tools (stand-in builder, parity, speed)."""

from __future__ import annotations

import os
import re
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


_OUT_OF_MEMORY = re.compile(
    r"can't allocate memory|Cannot allocate memory|out of memory|Failed to allocate|bad_alloc"
    r"|Unable to allocate|std::bad_alloc",
    re.IGNORECASE,
)


def _guard(fn: Any, *args: Any, **kwargs: Any) -> Any:
    # SpeakerModelError and AudioError reach cli.py's exit-code map; a ValueError here is bad input too.
    # An allocation that fails (torch's DefaultCPUAllocator, CUDA, ONNX Runtime's arena, numpy) is a
    # refusal of this size of work, said as such (exit 1), not an internal error. numpy's
    # RuntimeWarnings (a log of silence, an overflow in a refused input) are not printed: the
    # result or the refusal says what matters.
    import warnings

    import numpy as np

    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(*args, **kwargs)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    except MemoryError:
        raise click.ClickException(_no_memory("")) from None
    except Exception as exc:  # RuntimeError and ONNX Runtime's own exception types
        if _OUT_OF_MEMORY.search(str(exc)) is None:
            raise
        raise click.ClickException(_no_memory(str(exc))) from None


# CAM++'s largest activation is about this many bytes per fbank frame (fp32; measured: 174,000
# frames, a 29-minute reference, asked 1,781,760,000 bytes at once), and at its peak about
# PEAK_FACTOR such tensors are alive (ONNX Runtime's arena, torch's, the features).
BYTES_PER_FRAME = 10_240
PEAK_FACTOR = 4
FRAMES_PER_SECOND = 100  # fbank: a frame every 10 ms


def _headroom() -> int | None:
    """Bytes this process may still allocate: the address-space limit less what it maps now, and
    the host's available memory; None where neither can be read."""
    import resource

    room: list[int] = []
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        room.append(soft - _proc_kib("/proc/self/status", "VmSize:") * 1024)
    available = _proc_kib("/proc/meminfo", "MemAvailable:")
    if available:
        room.append(available * 1024)
    return min(room) if room else None


def _proc_kib(path: str, field: str) -> int:
    try:  # the kernel's own small files (the guarded reader refuses /proc by design)
        with open(path, "rb") as handle:
            text = handle.read(1 << 16).decode("ascii", "replace")
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(field):
            parts = line.split()
            return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return 0


def _fits(seconds: float, batch: int, what: str) -> None:
    """Refuse at once work whose peak memory cannot fit (a failed allocation takes a minute)."""
    need = int(seconds * FRAMES_PER_SECOND) * batch * BYTES_PER_FRAME * PEAK_FACTOR
    room = _headroom()
    if room is not None and need > room:
        raise click.ClickException(
            f"{what} needs about {need / 2**30:.1f} GiB at its peak; this process may allocate about "
            f"{max(room, 0) / 2**30:.1f} GiB: use shorter references, fewer --seconds or a smaller "
            "--batch, or a host with more memory"
        )


def _no_memory(detail: str) -> str:
    said = re.search(r"tried to allocate [0-9]+ bytes|[Ff]ailed to allocate memory[^.\n]{0,80}", detail)
    return (
        "not enough memory for this work"
        + (f" ({said.group(0)})" if said else "")
        + ": use shorter references, fewer --seconds or a smaller --batch, or a host with more memory"
    )


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
    longest = max(r.waveform.shape[-1] / max(r.sample_rate, 1) for r in refs)
    _fits(longest, 1, f"a reference of {longest:.0f} s")
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
    seconds, batches = _float_list(args.seconds), _int_list(args.batches)
    _fits(max(seconds), max(batches), f"--seconds {max(seconds):g} at --batch {max(batches)}")
    with progress(f"timing CAM++ on {target}"):
        rows = _guard(
            run_bench,
            args.onnx_path,
            device=target,
            seconds=seconds,
            batches=batches,
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

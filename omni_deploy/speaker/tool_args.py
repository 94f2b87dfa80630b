"""The options of the `omni-deploy spk` tools, declared once (each field is its option:
omni_deploy/common/cli_fields.py). Plain data: importing this loads no torch."""

from __future__ import annotations

from dataclasses import dataclass

from omni_deploy.common import cli_fields as cf
from omni_deploy.common.cli_fields import option, shared_option

DEVICE = cf.ValueType("device")  # auto, cpu, cuda or cuda:N, checked before torch loads


@dataclass(frozen=True)
class StandinArgs:
    seed: int = option(
        "--seed",
        type=cf.count(0, 2**32 - 1),
        default=0,
        show_default=True,
        help="Seed of the random weights.",
    )
    force: bool = option("--force", default=False, is_flag=True, help="Replace OUT if it exists.")
    fmt: str = shared_option(
        "output",
        ("text", "json"),
        default="text",
        help="text: what was written, for people; json: the path, seed and graph counts (docs/json-output.md).",
    )


@dataclass(frozen=True, kw_only=True)  # --onnx is required, before options with defaults
class _EncoderArgs:
    """What parity and bench both run: a campplus.onnx, and our encoder on a device."""

    onnx_path: str = option(
        "--onnx",
        required=True,
        type=cf.path(exists=True, dir_okay=False, as_path=False),
        help="campplus.onnx (the model's assets/token2wav/campplus.onnx, or a stand-in).",
    )
    device: str = option(
        "--device",
        type=DEVICE,
        default="auto",
        show_default=True,
        help="Where our encoder runs: cuda, cuda:N, cpu, or auto (cuda when available).",
    )


@dataclass(frozen=True, kw_only=True)
class ParityArgs(_EncoderArgs):
    tf32: str = option(
        "--tf32",
        type=cf.choice("off", "on", "both"),
        default="both",
        show_default=True,
        help="Matmul TF32 of our encoder: compare with it off, on, or both.",
    )
    synthetic: int | None = option(
        "--synthetic", type=cf.count(1, 1024), default=None, help="Use N synthetic speech-like references."
    )
    min_cosine: float = option(
        "--min-cosine",
        type=cf.real(-1.0),  # finite; above 1 is a threshold nothing meets (tests use it)
        default=0.99999,
        show_default=True,
        help="Exit 1 when any cosine similarity is below this.",
    )
    fmt: str = shared_option(
        "output",
        ("text", "json"),
        default="text",
        help="text: a table of cosines, for people; json: every case and the summary per TF32 setting (docs/json-output.md).",
    )


@dataclass(frozen=True, kw_only=True)
class SpkBenchArgs(_EncoderArgs):
    seconds: str = option(
        "--seconds", default="3,6", show_default=True, help="Reference lengths, comma-separated."
    )
    batches: str = option(
        "--batch", default="1,8,32", show_default=True, help="Batch sizes, comma-separated."
    )
    mixed: int = option(
        "--mixed",
        type=cf.count(0, 4096),
        default=32,
        show_default=True,
        help="Also time N references of 1-6 s (0: off).",
    )
    repeats: int = option(
        "--repeats",
        type=cf.count(1, 100_000),
        default=30,
        show_default=True,
        help="Timed calls per case (median and p95).",
    )
    tf32: bool = option(
        "--tf32/--no-tf32", default=True, show_default=True, help="Matmul TF32 for our encoder."
    )
    fmt: str = shared_option(
        "output",
        ("text", "json"),
        default="text",
        help="text: a latency table, for people; json: every row of timings (docs/json-output.md).",
    )

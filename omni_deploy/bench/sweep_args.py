"""The options `bench run` and `bench ab` share, declared once: what a sweep is, where it writes,
how it reports (each field is its option: omni_deploy/common/cli_fields.py). The command turns
them into SweepOptions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omni_deploy.bench.protocol import SweepOptions
from omni_deploy.common import cli_fields as cf
from omni_deploy.common import defaults
from omni_deploy.common.cli_fields import option, shared_option

MAX_CONCURRENCY = 100_000


@dataclass(frozen=True, kw_only=True)  # --dataset-path is required, among options with defaults
class SweepArgs:
    model: str = option(
        "--model",
        default=defaults.MODEL,
        show_default=True,
        help="The model the server runs (hub id or path), as `serve --model` means it.",
    )
    served_model_name: str | None = option(
        "--served-model-name",
        default=None,
        help="Name the API answers to, if the server was given one (default: --model, as vLLM's).",
    )
    dataset_path: Path = option(
        "--dataset-path",
        required=True,
        type=cf.path(exists=True, file_okay=False),
        help="Seed-TTS input folder: en/meta.lst and the WAVs it names (`bench inputs` lays one out; "
        "files are checked against its manifest.json).",
    )
    tokenizer: str | None = option(
        "--tokenizer",
        default=None,
        help="Tokenizer vllm bench serve counts tokens with (default: --model).",
    )
    concurrency: str = option(
        "--concurrency",
        default="1,4,8,16,32",
        show_default=True,
        help="Concurrency levels, comma-separated.",
    )
    prompts: int = option(
        "--prompts",
        type=cf.count(1, 10**6),
        default=SweepOptions.prompts,
        show_default=True,
        help="Requests per round.",
    )
    rounds: int = option(
        "--rounds",
        type=cf.count(1, 1000),
        default=SweepOptions.rounds,
        show_default=True,
        help="Measured rounds per concurrency.",
    )
    discard: int = option(
        "--discard",
        type=cf.count(0, 1000),
        default=SweepOptions.discard,
        show_default=True,
        help="Rounds run and thrown away before the measured ones, per concurrency.",
    )
    warmup: int = option(
        "--warmup",
        type=cf.count(0, 10**6),
        default=SweepOptions.warmup,
        show_default=True,
        help="Warm-up requests.",
    )
    warmup_path: Path | None = option(
        "--warmup-path",
        type=cf.path(exists=True, file_okay=False),
        default=None,
        help="Seed-TTS directory for the warm-up requests (default: --dataset-path).",
    )
    warmup_concurrency: int = option(
        "--warmup-concurrency",
        type=cf.count(1, MAX_CONCURRENCY),
        default=SweepOptions.warmup_concurrency,
        show_default=True,
        help="Concurrency of the warm-up requests.",
    )
    extra_body: Path | None = option(
        "--extra-body",
        type=cf.path(exists=True, dir_okay=False),
        default=None,
        help="Sampling settings of the three stages (default: the write-up's).",
    )
    result_dir: Path = option(
        "--result-dir",
        type=cf.path(file_okay=False),
        default=SweepOptions.result_dir,
        show_default=True,
        help="Folder for the result files (one JSON per round; finished rounds are kept, not re-run).",
    )
    ready_timeout: float = option(
        "--ready-timeout",
        type=cf.seconds(),
        default=defaults.READY_TIMEOUT_S,
        show_default=True,
        help="Seconds to wait for the server's /health before the first round.",
    )
    dry_run: bool = option("--dry-run", default=False, is_flag=True, help="Print the commands; run nothing.")
    fmt: str = shared_option(
        "output",
        ("text", "json"),
        default="text",
        help="json: the rounds (commands, result files, done or not) as one document on stdout "
        "(docs/json-output.md); progress stays on stderr.",
    )


@dataclass(frozen=True, kw_only=True)
class RunArgs:
    """`bench run`'s own options, beside the sweep's."""

    base_url: str = option(
        "--base-url", required=True, help=f"Server URL, e.g. http://127.0.0.1:{defaults.PORT}."
    )
    order: str = option(
        "--order",
        type=cf.choice("forward", "reverse"),
        default="forward",
        show_default=True,
        help="Concurrency order: forward (low to high) or reverse; A/B runs use both to cancel drift.",
    )


@dataclass(frozen=True, kw_only=True)
class AbArgs:
    """`bench ab`'s own options, beside the sweep's: the two set-ups and the port they take turns on."""

    a_pairs: tuple[str, ...] = option(
        "--a",
        multiple=True,
        required=True,
        metavar="KEY=VALUE",
        help="serve options of A (baseline).",
    )
    b_pairs: tuple[str, ...] = option(
        "--b", multiple=True, required=True, metavar="KEY=VALUE", help="serve options of B."
    )
    port: int = option(
        "--port",
        type=cf.PORT,
        default=defaults.PORT,
        show_default=True,
        help="Port the A and B servers listen on (one at a time).",
    )

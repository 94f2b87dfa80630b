"""The options of `bench inputs`, declared once (each field is its option:
omni_deploy/common/cli_fields.py; the command builds the dataclass by keyword)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omni_deploy.common import cli_fields as cf
from omni_deploy.common.cli_fields import option

MAX_REQUESTS = 10**6


@dataclass(frozen=True, kw_only=True)  # --from is required, among options with defaults
class InputsArgs:
    checkout: Path = option(  # the field is the option's name: --from fills checkout
        "--from",
        required=True,
        type=cf.path(exists=True, file_okay=False),
        help="A Seed-TTS evaluation checkout (seed-tts-eval's layout: en/meta.lst and the WAVs it names).",
    )
    out: Path = option(
        "--out",
        type=cf.path(file_okay=False),
        default=Path("inputs"),
        show_default=True,
        help="Folder for evaluation/ and warmup/ (neither may exist: nothing is overwritten).",
    )
    evaluation: int = option(
        "--evaluation",
        type=cf.count(1, MAX_REQUESTS),
        default=64,
        show_default=True,
        help="Evaluation requests: the first N usable rows of meta.lst.",
    )
    warmup: int = option(
        "--warmup",
        type=cf.count(0, MAX_REQUESTS),
        default=32,
        show_default=True,
        help="Warm-up requests: the next N rows (disjoint from the evaluation ones; 0: no warmup/).",
    )

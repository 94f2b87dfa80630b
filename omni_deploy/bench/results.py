"""Reading `vllm bench serve --omni --save-result` files.

Field names as vllm-omni 0.30.0's benchmark writes them (vllm_omni/benchmarks/patch/patch.py and
vllm_omni/metrics/definitions.py): duration, completed, failed, request_throughput,
total_audio_duration_s, audio_throughput, mean_/median_/p<pct>_audio_ttfp_ms, mean_audio_rtf,
errors; vLLM adds max_concurrency and the --metadata pairs at the top level.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omni_deploy.common import guarded
from omni_deploy.common.errors import ConfigError
from omni_deploy.config.safe_read import read_json

METRICS = (
    "audio_throughput",
    "ttfa_p50_ms",
    "ttfa_p95_ms",
    "rtf_mean",
    "request_throughput",
    "output_audio_s",
)
SKIPPED_ROLES = ("warmup", "discard")


MAX_FILES = 10_000
MAX_CONCURRENCY = 1_000_000


class ResultError(Exception):
    """A result file that cannot be used; the message says why."""


@dataclass
class Round:
    path: Path
    concurrency: int | None
    role: str
    completed: int
    failed: int
    metrics: dict[str, float | None]
    problems: list[str] = field(default_factory=list)

    @property
    def measured(self) -> bool:
        return self.role not in SKIPPED_ROLES


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str


@dataclass
class ResultSet:
    rounds: list[Round] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


MAX_COUNT = 10**15  # requests of one round: far past any benchmark, well inside a float


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _count(data: dict[str, Any], key: str) -> int | None:
    """A non-negative integer field (a bool, a string or a float is not one); None when absent."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ResultError(f"{key} must be a non-negative integer, not {_shown(value)}")
    if value > MAX_COUNT:  # a 401-digit count: no float holds it (OverflowError in every ratio)
        raise ResultError(f"{key} must be at most {MAX_COUNT}, not {_shown(value)}")
    return value


def _real(data: dict[str, Any], key: str, positive: bool = False) -> float | None:
    """A finite, non-negative (or positive) number; None when absent or null."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ResultError(f"{key} must be a number, not {_shown(value)}")
    try:
        number = float(value)
    except OverflowError:  # an integer of 401 digits: past every float
        raise ResultError(f"{key} must be a finite number, not {_shown(value)}") from None
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        bound = "positive" if positive else "non-negative"
        raise ResultError(f"{key} must be a finite {bound} number, not {_shown(value)}")
    return number


def _concurrency(data: dict[str, Any]) -> int | None:
    value = data.get("max_concurrency")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CONCURRENCY:
        raise ResultError(
            f"max_concurrency must be an integer from 1 to {MAX_CONCURRENCY}, not {_shown(value)}"
        )
    return value


def _failed(data: dict[str, Any]) -> int:
    failed = _count(data, "failed")
    if failed is not None:
        return failed
    errors = data.get("errors")
    if errors is None:
        return 0
    if not isinstance(errors, list) or not all(isinstance(e, str) or e is None for e in errors):
        raise ResultError("errors must be a list of strings")
    return sum(1 for e in errors if e)


def parse_round(path: Path, data: Any) -> Round:
    """Validate every field the report reads: types, finite, ranges (raises ResultError)."""
    if not isinstance(data, dict):
        raise ResultError("not a benchmark result (top level is not an object)")
    role = data.get("omni_deploy_round")
    if role is not None and not isinstance(role, str):
        raise ResultError(f"omni_deploy_round must be text, not {_shown(role)}")
    if not role:
        stem = path.stem.lower()
        role = next((r for r in SKIPPED_ROLES if stem.startswith(r)), "measured")
    completed = _count(data, "completed")
    if completed is None:
        raise ResultError("missing completed (not a vllm bench serve result?)")
    failed = _failed(data)
    concurrency = _concurrency(data)
    duration = _real(data, "duration", positive=True)
    audio = _real(data, "total_audio_duration_s")
    throughput = audio / duration if audio is not None and duration else None
    metrics = {
        "audio_throughput": throughput if throughput is None or math.isfinite(throughput) else None,
        "ttfa_p50_ms": _real(data, "p50_audio_ttfp_ms"),
        "ttfa_p95_ms": _real(data, "p95_audio_ttfp_ms"),
        "rtf_mean": _real(data, "mean_audio_rtf"),
        "request_throughput": _real(data, "request_throughput"),
        "output_audio_s": audio,
    }
    problems = [f"missing {name}" for name, value in metrics.items() if value is None]
    if failed:
        problems.append(f"{failed} failed request(s)")
    return Round(path, concurrency, role, completed, failed, metrics, problems)


def read_round(path: Path) -> Round:
    try:
        data = read_json(path, str(path))
    except ConfigError as exc:
        raise ResultError(f"not a readable result file ({exc.message})") from None
    return parse_round(path, data)


def unfinished(path: Path) -> str | None:
    """Why the round file at `path` is not a finished round (None: it is one). A file that is
    empty, cut short or not a result (a round killed while writing, a disk that filled) is not:
    the round runs again rather than a stub counting as done."""
    if not path.exists() and not path.is_symlink():
        return "it does not exist"
    try:
        read_round(path)
    except ResultError as exc:
        return str(exc)
    return None


def read_dir(directory: Path) -> ResultSet:
    """Every *.json below `directory`: valid rounds, and the files skipped with the reason."""
    if not directory.is_dir():
        raise ResultError(f"{directory}: no such directory")
    found = ResultSet()
    try:  # iterative and bounded: a tree 1,100 levels deep or a link cycle is a message
        paths = sorted(guarded.walk(directory, (".json",)))
    except guarded.Refused as refused:
        raise ResultError(f"{directory}: {refused.why}") from None
    if len(paths) > MAX_FILES:
        raise ResultError(f"{directory}: more than {MAX_FILES} result files; point at one sweep")
    for path in paths:
        try:
            found.rounds.append(read_round(path))
        except ResultError as exc:
            found.skipped.append(Skipped(path, str(exc)))
    for r in found.rounds:
        if r.concurrency is None:
            r.problems.append("no max_concurrency")
    return found

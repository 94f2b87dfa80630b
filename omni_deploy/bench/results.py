"""Reading `vllm bench serve --omni --save-result` files.

Field names as vllm-omni 0.30.0's benchmark writes them (vllm_omni/benchmarks/patch/patch.py and
vllm_omni/metrics/definitions.py): duration, completed, failed, request_throughput,
total_audio_duration_s, audio_throughput, mean_/median_/p<pct>_audio_ttfp_ms, mean_audio_rtf,
errors; vLLM adds max_concurrency and the --metadata pairs at the top level.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

METRICS = (
    "audio_throughput",
    "ttfa_p50_ms",
    "ttfa_p95_ms",
    "rtf_mean",
    "request_throughput",
    "output_audio_s",
)
SKIPPED_ROLES = ("warmup", "discard")


class ResultError(Exception):
    pass


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


def _number(data: dict[str, Any], key: str) -> float | None:
    value = data.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def read_round(path: Path) -> Round:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ResultError(f"{path}: not a readable result file ({exc})") from None
    if not isinstance(data, dict):
        raise ResultError(f"{path}: not a benchmark result (top level is not an object)")
    role = str(data.get("omni_deploy_round") or "")
    if not role:
        stem = path.stem.lower()
        role = next((r for r in SKIPPED_ROLES if stem.startswith(r)), "measured")
    concurrency = data.get("max_concurrency")
    completed = int(data.get("completed") or 0)
    failed = data.get("failed")
    if not isinstance(failed, int):
        errors = data.get("errors") or []
        failed = sum(1 for e in errors if e) if isinstance(errors, list) else 0
    duration = _number(data, "duration")
    audio = _number(data, "total_audio_duration_s")
    metrics = {
        "audio_throughput": audio / duration if audio is not None and duration else None,
        "ttfa_p50_ms": _number(data, "p50_audio_ttfp_ms"),
        "ttfa_p95_ms": _number(data, "p95_audio_ttfp_ms"),
        "rtf_mean": _number(data, "mean_audio_rtf"),
        "request_throughput": _number(data, "request_throughput"),
        "output_audio_s": audio,
    }
    problems = [f"missing {name}" for name, value in metrics.items() if value is None]
    if failed:
        problems.append(f"{failed} failed request(s)")
    return Round(
        path,
        int(concurrency) if isinstance(concurrency, int) else None,
        role,
        completed,
        failed,
        metrics,
        problems,
    )


def read_dir(directory: Path) -> list[Round]:
    if not directory.is_dir():
        raise ResultError(f"{directory}: no such directory")
    rounds = [read_round(p) for p in sorted(directory.rglob("*.json")) if not p.name.startswith(".")]
    for r in rounds:
        if r.concurrency is None:
            r.problems.append("no max_concurrency")
    return rounds

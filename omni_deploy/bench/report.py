"""Aggregate measured rounds per source and concurrency, compare sources, and format the table."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omni_deploy.bench.results import METRICS, Round, Skipped
from omni_deploy.common.output.escape import for_markdown, for_terminal


@dataclass
class Row:
    source: str
    concurrency: int
    rounds: int
    failed: int
    metrics: dict[str, dict[str, float] | None]
    flagged: list[str] = field(default_factory=list)
    baseline: bool = False  # the --baseline side of a comparison (listed first per concurrency)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "concurrency": self.concurrency,
            "rounds": self.rounds,
            "failed": self.failed,
            **self.metrics,
            "flagged": self.flagged,
        }


def _stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    # Each value divided first: the sum of two finite values may overflow (1e308 + 1e308 = inf),
    # their mean never does.
    return {"mean": sum(v / len(values) for v in values), "min": min(values), "max": max(values)}


def aggregate(rounds: list[Round], source: str, baseline: bool = False) -> list[Row]:
    """Rows per concurrency from the measured rounds; flagged rounds are listed, not averaged."""
    by_c: dict[int, list[Round]] = {}
    for r in rounds:
        if r.measured and r.concurrency is not None:
            by_c.setdefault(r.concurrency, []).append(r)
    rows = []
    for c in sorted(by_c):
        group = by_c[c]
        clean = [r for r in group if not r.problems]
        flagged = [f"{r.path.name}: {'; '.join(r.problems)}" for r in group if r.problems]
        metrics = {m: _stats([r.metrics[m] for r in clean if r.metrics[m] is not None]) for m in METRICS}  # type: ignore[misc]
        rows.append(Row(source, c, len(clean), sum(r.failed for r in group), metrics, flagged, baseline))
    return rows


def changes(candidate: list[Row], baseline: list[Row]) -> list[dict[str, Any]]:
    base = {r.concurrency: r for r in baseline}
    out = []
    for row in candidate:
        other = base.get(row.concurrency)
        if other is None:
            continue
        entry: dict[str, Any] = {"concurrency": row.concurrency}
        for m in METRICS:
            a, b = row.metrics[m], other.metrics[m]
            entry[m] = _change(a, b)
        out.append(entry)
    return out


def _change(a: dict[str, float] | None, b: dict[str, float] | None) -> float | None:
    """Percent change of the means; None where there is none to give (a zero or tiny base whose
    ratio overflows is no figure)."""
    if a is None or b is None or b["mean"] == 0:
        return None
    try:
        change = 100.0 * ((a["mean"] - b["mean"]) / b["mean"])
    except OverflowError:
        return None
    return change if math.isfinite(change) else None


def _fmt(stats: dict[str, float] | None, digits: int, rounds: int = 2) -> str:
    """mean (min-max) over the rounds; a single round has no range to show."""
    if stats is None:
        return "n/a"
    if rounds < 2 or stats["min"] == stats["max"]:
        return _number(stats["mean"], digits)
    return (
        f"{_number(stats['mean'], digits)} ({_number(stats['min'], digits)}-{_number(stats['max'], digits)})"
    )


def _number(value: float, digits: int) -> str:
    """Fixed point as a person reads it; past 1e15 (a hostile file's 1e308) in e-notation, not 300 digits."""
    return f"{value:.{digits}f}" if abs(value) < 1e15 else f"{value:.{digits}e}"


@dataclass(frozen=True)
class Metric:
    key: str
    title: str  # table header
    digits: int
    better: str | None  # "higher", "lower", or None (what was measured, not a score)
    unit: str  # axis label


METRIC_COLUMNS = (
    Metric("audio_throughput", "Audio-s/s", 3, "higher", "seconds of audio per second"),
    Metric("ttfa_p50_ms", "TTFA p50 ms", 1, "lower", "ms to the first audio, median"),
    Metric("ttfa_p95_ms", "TTFA p95 ms", 1, "lower", "ms to the first audio, 95th percentile"),
    Metric("rtf_mean", "Mean RTF", 4, "lower", "real-time factor"),
    Metric("request_throughput", "Req/s", 3, "higher", "requests per second"),
    Metric("output_audio_s", "Audio s", 1, None, "seconds of audio per round"),
)
_COLUMNS = [(m.key, m.title, m.digits) for m in METRIC_COLUMNS]


def _ordered(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r.concurrency, not r.baseline))


def source_names(candidate: Path, baseline: Path | None) -> tuple[str, str | None]:
    """What the table calls each side: the folders' names, or their paths where the names agree."""
    if baseline is None:
        return candidate.name or str(candidate), None
    if candidate.name and baseline.name and candidate.name != baseline.name:
        return candidate.name, baseline.name
    return str(candidate), str(baseline)


def as_markdown(rows: list[Row], diffs: list[dict[str, Any]]) -> str:
    header = "| C | Source | " + " | ".join(title for _, title, _ in _COLUMNS) + " | Rounds | Failed |"
    lines = [header, "|" + " --- |" * (len(_COLUMNS) + 4)]
    for r in _ordered(rows):
        cells = " | ".join(_fmt(r.metrics[m], d, r.rounds) for m, _, d in _COLUMNS)
        lines.append(f"| {r.concurrency} | {for_markdown(r.source)} | {cells} | {r.rounds} | {r.failed} |")
    lines += _diff_lines(diffs, markdown=True, names=_names(rows))
    lines += [f"\nflagged (not averaged): {for_markdown(f)}" for r in rows for f in r.flagged]
    return "\n".join(lines)


def as_text(rows: list[Row], diffs: list[dict[str, Any]]) -> str:
    """The table for a terminal: each metric as mean (min-max) over the measured rounds."""
    from omni_deploy.common.output.tables import Column, to_text

    columns = [
        Column("C", numeric=True),
        Column("Source"),
        Column("Rounds", numeric=True),
        Column("Failed", numeric=True),
        *(Column(title, numeric=True) for _, title, _ in _COLUMNS),
    ]
    table = [
        [
            r.concurrency,
            r.source,
            r.rounds,
            r.failed,
            *(_fmt(r.metrics[m], d, r.rounds) for m, _, d in _COLUMNS),
        ]
        for r in _ordered(rows)
    ]
    lines = [to_text(columns, table, keys=2)]
    lines += _diff_lines(diffs, markdown=False, names=_names(rows))
    for r in rows:
        for f in r.flagged:
            lines.append(for_terminal(f"flagged, not averaged: {r.source} C={r.concurrency} {f}"))
    return "\n".join(lines)


def _names(rows: list[Row]) -> tuple[str, str]:
    candidate = next((r.source for r in rows if not r.baseline), "candidate")
    baseline = next((r.source for r in rows if r.baseline), "baseline")
    return candidate, baseline


def _diff_lines(diffs: list[dict[str, Any]], markdown: bool, names: tuple[str, str]) -> list[str]:
    if not diffs:
        return []
    safe = for_markdown if markdown else for_terminal  # source names are folder names
    heading = f"Change of {safe(names[0])} vs {safe(names[1])} (mean, %):"
    if not markdown:
        from omni_deploy.common.output.tables import Column, to_text

        columns = [Column("C", numeric=True), *(Column(title, numeric=True) for _, title, _ in _COLUMNS)]
        table = [[d["concurrency"], *(_percent(d[m]) for m, _, _ in _COLUMNS)] for d in diffs]
        return ["", heading, to_text(columns, table, keys=1)]
    lines = ["", heading]
    for d in diffs:
        parts = [f"{title} {_percent(d[m])}" for m, title, _ in _COLUMNS]
        lines.append(f"- C={d['concurrency']}: " + ", ".join(parts))
    return lines


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1f}%"


def _finite(value: Any) -> Any:
    """JSON has no NaN or Infinity: a value that is not finite is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def as_json(rows: list[Row], diffs: list[dict[str, Any]], skipped: list[Skipped] | None = None) -> str:
    from omni_deploy.common.output.json_doc import SCHEMA_VERSION

    data = {
        "schema_version": SCHEMA_VERSION,
        "rows": [r.as_dict() for r in _ordered(rows)],
        "changes": diffs,
        "skipped": [{"file": str(s.path), "reason": s.reason} for s in skipped or []],
    }
    return json.dumps(_finite(data), indent=2, allow_nan=False)


def skipped_lines(skipped: list[Skipped]) -> list[str]:
    return [for_terminal(f"skipped {s.path}: {s.reason}") for s in skipped]

"""What the server said about its speaker-embedding backend: the plugin's report files and lines.

omni-deploy's vLLM plugin reports once per patched component (a MiniCPM-o Code2Wav stage, a
processor, an extractor) when it settles its speaker path: a JSON file in the directory
OMNI_DEPLOY_SPK_REPORT_DIR names (serve sets it to the run directory's `speaker/`; rewritten when the
encoder is retired for good), and an INFO line in the server log (`omni-deploy CAM++ report:
stage=2 backend=cuda-torch device=cuda:0 ...`), plus a WARNING (`omni-deploy CAM++: ...`) whenever
it stands aside or falls back. After readiness `serve` reads them back, files first (they do not
depend on the log level), so the operator sees what each stage actually took, not what was asked
for, and hears loudly when none reported (plugin not installed in the server's environment, left
out by VLLM_PLUGINS, a `vllm` from another environment). Pure apart from reading the files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from omni_deploy.integrations.report import read_files, startup_fallback
from omni_deploy.integrations.speaker_rules import LOG_PREFIX, PLUGIN_NAME, PLUGINS_ALLOWLIST_ENV, REPORT_MARK

WARNING_MARK = LOG_PREFIX  # the plugin's warnings begin with it
_FIELD = re.compile(r"([a-z][a-z0-9-]*)=(\S+)")


@dataclass(frozen=True)
class StageReport:
    stage: str
    backend: str
    fields: dict[str, str]

    def describe(self) -> str:
        extras = " ".join(f"{k}={v}" for k, v in self.fields.items() if k not in ("stage", "backend"))
        where = f"stage {self.stage}" if self.stage.isdigit() or self.stage == "?" else self.stage
        return f"{where}: {self.backend} ({extras})"


@dataclass
class SpeakerReport:
    stages: list[StageReport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    source: str = "none"  # "report files", "server log" or "none"

    def as_dict(self) -> dict[str, Any]:
        return {
            "stages": [asdict(s) for s in self.stages],
            "warnings": self.warnings,
            "reported": bool(self.stages),
            "source": self.source,
        }


def parse_report_line(line: str) -> StageReport | None:
    at = line.find(REPORT_MARK)
    if at < 0:
        return None
    fields = dict(_FIELD.findall(line[at + len(REPORT_MARK) :]))
    if "backend" not in fields:
        return None
    return StageReport(fields.get("stage", "?"), fields["backend"], fields)


# A report file's keys as the report line names them.
_FILE_FIELDS = {"device": "device", "tf32": "tf32", "kernels": "kernels", "onnx": "onnx", "replaced": "replaced",
                "why": "decided-by", "model": "model", "vllm_omni": "vllm-omni", "retired": "retired",
                "pid": "pid", "prepare": "prepare", "layout": "layout", "prefetch": "prefetch"}  # fmt: skip


def parse_report_file(record: Any) -> StageReport | None:
    if not isinstance(record, dict) or not isinstance(record.get("backend"), str):
        return None
    fields = {"stage": str(record.get("stage", "?")), "backend": record["backend"]}
    fields |= {name: str(record[key]) for key, name in _FILE_FIELDS.items() if record.get(key) is not None}
    return StageReport(fields["stage"], record["backend"], fields)


def read_report_files(directory: Path) -> tuple[list[StageReport], list[str]]:
    """The report files in `directory` (one per component and process), and what could not be read."""
    records, problems = read_files(directory)
    return [s for s in map(parse_report_file, records) if s is not None], problems


def read_report(lines: Iterable[str], directory: Path | None = None) -> SpeakerReport:
    """The report files in `directory` where there are any (one per process, current), else the
    report lines of the log; the log's warnings either way."""
    report = SpeakerReport()
    from_log = []
    for line in lines:
        stage = parse_report_line(line)
        if stage is not None:
            from_log.append(stage)
        elif WARNING_MARK in line:
            report.warnings.append(line[line.find(WARNING_MARK) :].strip())
    files, problems = (
        read_report_files(directory) if directory is not None and directory.is_dir() else ([], [])
    )
    report.stages = files or from_log
    report.source = "report files" if files else ("server log" if from_log else "none")
    report.warnings += problems
    return report


def summary_lines(
    report: SpeakerReport, expected: str | None, later: str | None = None
) -> list[tuple[str, str]]:
    """(level, text) lines for the operator; level is "info" or "warning". `later` names a model
    whose speaker path is settled at its first request with a reference voice, not at start-up
    (its report comes then: `explain --backend --probe` reads it)."""
    if not report.stages and later is not None:
        return [
            (
                "info",
                f"{later} settles its speaker path at the first request with a reference voice; its report "
                "comes then (`omni-deploy explain --backend --probe` on this host reads it)"
                + (f"; the deploy file asks for {expected}" if expected else ""),
            )
        ]
    if not report.stages:
        return [
            (
                "warning",
                "NO speaker-backend report from any Code2Wav stage (no report file, nothing in the server log): "
                "omni-deploy's "
                f"vLLM plugin did not run there ({PLUGINS_ALLOWLIST_ENV} without {PLUGIN_NAME}, "
                "omni-deploy not installed in the server's environment, or a `vllm` from another "
                f"environment); the speaker embedding is likely on ONNX Runtime on the CPU"
                + (f", not {expected}" if expected and expected != "cpu-onnxruntime" else "")
                + ". Check with `omni-deploy explain --backend --probe` on the serving host.",
            )
        ]
    out: list[tuple[str, str]] = []
    for stage in report.stages:
        level = "warning" if expected and stage.backend != expected else "info"
        note = f" (the deploy file asked for {expected})" if level == "warning" else ""
        out.append((level, f"speaker backend reported by the server: {stage.describe()}{note}"))
        advice = startup_fallback(stage.fields.get("decided-by", ""), stage.fields.get("prepare", "n/a"))
        if advice is not None:
            where = f"stage {stage.stage}" if stage.stage.isdigit() or stage.stage == "?" else stage.stage
            out.append(("warning", f"{where}: {advice}"))
    out += [("warning", f"the server said: {w}") for w in report.warnings]
    return out

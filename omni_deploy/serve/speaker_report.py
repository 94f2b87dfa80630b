"""What the server said about its speaker-embedding backend: the plugin's report lines in its log.

omni-deploy's vLLM plugin logs one INFO line per MiniCPM-o Code2Wav stage when the stage builds
its backend (`omni-deploy CAM++ report: stage=2 backend=cuda-torch device=cuda:0 ...`) and a
WARNING (`omni-deploy CAM++: ...`) whenever it stands aside or falls back. After readiness `serve`
reads them back, so the operator sees what each stage actually took, not what was asked for, and
hears loudly when no stage reported (plugin not installed in the server's environment, left out by
VLLM_PLUGINS, a `vllm` from another environment). Pure: lines in, a summary out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from omni_deploy.speaker_rules import LOG_PREFIX, PLUGIN_NAME, PLUGINS_ALLOWLIST_ENV, REPORT_MARK

WARNING_MARK = LOG_PREFIX  # the plugin's warnings begin with it
_FIELD = re.compile(r"([a-z][a-z0-9-]*)=(\S+)")


@dataclass(frozen=True)
class StageReport:
    stage: str
    backend: str
    fields: dict[str, str]

    def describe(self) -> str:
        extras = " ".join(f"{k}={v}" for k, v in self.fields.items() if k not in ("stage", "backend"))
        return f"stage {self.stage}: {self.backend} ({extras})"


@dataclass
class SpeakerReport:
    stages: list[StageReport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "stages": [asdict(s) for s in self.stages],
            "warnings": self.warnings,
            "reported": bool(self.stages),
        }


def parse_report_line(line: str) -> StageReport | None:
    at = line.find(REPORT_MARK)
    if at < 0:
        return None
    fields = dict(_FIELD.findall(line[at + len(REPORT_MARK) :]))
    if "backend" not in fields:
        return None
    return StageReport(fields.get("stage", "?"), fields["backend"], fields)


def read_report(lines: Iterable[str]) -> SpeakerReport:
    report = SpeakerReport()
    for line in lines:
        stage = parse_report_line(line)
        if stage is not None:
            report.stages.append(stage)
        elif WARNING_MARK in line:
            report.warnings.append(line[line.find(WARNING_MARK) :].strip())
    return report


def summary_lines(report: SpeakerReport, expected: str | None) -> list[tuple[str, str]]:
    """(level, text) lines for the operator; level is "info" or "warning"."""
    if not report.stages:
        return [
            (
                "warning",
                "NO speaker-backend report from any Code2Wav stage in the server log: omni-deploy's "
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
    out += [("warning", f"the server said: {w}") for w in report.warnings]
    return out

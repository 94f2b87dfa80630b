"""The start-up cases under tests/data/startup/: each file says which upstream line decides it and
whether vllm-omni starts with it (`# verdict: starts`) or refuses it (`# verdict: refused LINE`).

A verdict is compared on start-up codes only: the static codes that claim vllm-omni refuses the
file (or drops its connectors) at start-up, and the server check's own E395/E396. Other errors
(a typo that is merely ignored, GPU memory, several nodes) are about what the server would do
later or not at all, and no start-up code decides them (docs/validating.md's table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from omni_deploy.validate.runner import FileReport

CASES = Path(__file__).resolve().parents[1] / "data" / "startup"
# Static codes that say: vllm-omni refuses this at start-up, or starts with no connector config.
STARTUP_CODES = frozenset(
    {
        "E304",
        "E311",
        "E315",
        "E316",
        "E317",
        "E319",
        "E330",
        "E334",
        "E335",
        "E370",
        "E373",
        "E130",
        "E123",
        "E124",
        "E365",
        "E392",
    }
)
SERVER_CODES = frozenset({"E395", "E396"})
_VERDICT = re.compile(r"^# verdict: (starts|refused)(?: (\d+))?$")


@dataclass(frozen=True)
class Case:
    path: Path
    refused: bool
    line: int | None
    upstream: str
    server_decides: bool
    absent: tuple[str, ...]

    @property
    def target(self) -> str | None:
        match = re.search(r"--target-version (\S+)", self.path.read_text())
        return match.group(1) if match else None


def load(path: Path) -> Case:
    lines = path.read_text().splitlines()
    verdict = next((m for m in map(_VERDICT.match, lines) if m), None)
    upstream = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("# upstream:")), "")
    assert verdict is not None, f"{path.name}: no '# verdict: starts|refused LINE' line"
    assert re.search(r"\w+\.py:\d+", upstream), f"{path.name}: no '# upstream: file.py:LINE' comment"
    absent = tuple(c for line in lines if line.startswith("# absent:") for c in line.split(":", 1)[1].split())
    return Case(path, verdict.group(1) == "refused", int(verdict.group(2)) if verdict.group(2) else None,
                upstream, "# server: undecidable" not in lines, absent)  # fmt: skip


def cases() -> list[Case]:
    return [load(p) for p in sorted(CASES.glob("*.yaml"))]


def lines_of(report: FileReport, codes: frozenset[str], name: str) -> set[int]:
    """Lines (0: the whole file) of the case file where errors of `codes` were reported."""
    return {
        f.line for f in report.findings if f.code in codes and f.severity == "error" and f.file.endswith(name)
    }

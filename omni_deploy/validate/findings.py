"""Findings: what validate reports, each with a stable code and a place in a file."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from omni_deploy.codes import ERROR, INFO, WARNING, Code
from omni_deploy.config.nodes import Origin

__all__ = ["ERROR", "INFO", "WARNING", "Finding", "at"]


@dataclass(frozen=True)
class Finding:
    severity: str
    code: str
    file: str
    line: int
    column: int
    path: str
    message: str
    hint: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.line:  # about the whole file: no position, rather than a made-up line 0
            out["line"] = out["column"] = None
        return out

    def text(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        hint = f" ({self.hint})" if self.hint else ""
        return f"{where}: {self.severity}[{self.code}] {self.path}: {self.message}{hint}"


def at(
    origin: Origin | None,
    fallback_file: str,
    code: Code,
    path: str,
    message: str,
    hint: str | None = None,
) -> Finding:
    """A finding of a declared code (its severity comes from the table) at a value's origin."""
    if origin is None or origin.layer == "default":
        return Finding(code.severity, code.id, fallback_file, 0, 0, path, message, hint)
    return Finding(code.severity, code.id, origin.file, origin.line, origin.column, path, message, hint)

"""Findings: what validate reports, each with a stable code and a place in a file."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from omni_deploy.common.codes import ERROR, INFO, WARNING, Code
from omni_deploy.config.nodes import Origin

__all__ = ["ERROR", "INFO", "WARNING", "Finding", "Fix", "at", "renaming"]


@dataclass(frozen=True)
class Fix:
    """A fix with one right answer: the text at file:line:column is replaced.

    `choices` are (old, new) pairs, one per way the text may be spelt there (a key or a scalar
    may be quoted either way); the first whose `old` stands at the position applies, and where
    none does (the file changed since it was checked) the file is left as it is
    (validate/fixes.py).
    """

    file: str
    line: int
    column: int
    choices: tuple[tuple[str, str], ...]
    description: str  # what it does, for people: "rename 'max_num_seq' to 'max_num_seqs'"

    def as_dict(self) -> dict[str, Any]:
        return {
            "description": self.description,
            "line": self.line,
            "column": self.column,
            "replacements": [{"old": old, "new": new} for old, new in self.choices],
        }


def renaming(old: str, new: str) -> tuple[tuple[tuple[str, str], ...], str]:
    """Fix choices and description for a key spelt `old` (plain or quoted) that should be `new`."""
    choices = ((old, new), (f'"{old}"', f'"{new}"'), (f"'{old}'", f"'{new}'"))
    return choices, f"rename '{old}' to '{new}'"


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
    fix: Fix | None = None

    def __post_init__(self) -> None:
        # Every reporter shows the message: a value of megabytes quoted in it is cut once, here.
        from omni_deploy.common.output.escape import capped

        object.__setattr__(self, "message", capped(self.message))
        if self.hint is not None:
            object.__setattr__(self, "hint", capped(self.hint))

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["fix"] = self.fix.as_dict() if self.fix is not None else None
        if not self.line:  # about the whole file: no position, rather than a made-up line 0
            out["line"] = out["column"] = None
        return out

    def text(self) -> str:
        """One line for people; every part from a file goes through output.escape.for_terminal
        (a path, key or value cannot start a line, move the cursor or run a workflow command)."""
        from omni_deploy.common.output.escape import for_terminal as safe

        where = f"{safe(self.file)}:{self.line}:{self.column}" if self.line else safe(self.file)
        hint = f" ({safe(self.hint)})" if self.hint else ""
        return f"{where}: {self.severity}[{self.code}] {safe(self.path)}: {safe(self.message)}{hint}"


def at(
    origin: Origin | None,
    fallback_file: str,
    code: Code,
    path: str,
    message: str,
    hint: str | None = None,
    fix: tuple[tuple[tuple[str, str], ...], str] | None = None,
) -> Finding:
    """A finding of a declared code (its severity comes from the table) at a value's origin.

    `fix` (choices, description; see Fix): the text at the origin has one right replacement.
    """
    if origin is None or origin.layer == "default":
        return Finding(code.severity, code.id, fallback_file, 0, 0, path, message, hint)
    found = Fix(origin.file, origin.line, origin.column, *fix) if fix is not None else None
    return Finding(
        code.severity, code.id, origin.file, origin.line, origin.column, path, message, hint, found
    )

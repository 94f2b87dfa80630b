"""Checks own their finding codes: each declares the codes it may emit and documents every one.

A check is `def check_x(ctx: Context) -> list[Finding]` under `@emits(codes.E350, codes.W351)`;
validate's runner stops with an internal error when a check reports a code it did not declare.
Its docstring is the documentation of those codes (yamllint keeps a rule's documentation in its
module's docstring, ruff renders a rule's doc comment as its page): after the check's own
summary, one section per code, in this form:

    E350:
        What it does: adds up the gpu_memory_utilization of the stages on each device.
        Why: the stage that finds the device full fails at start-up, minutes in.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                gpu_memory_utilization: 0.4
        Passes:
            base_config: minicpmo_4_5_turn.yaml

An example is a deploy file, which may overlay the bundled MiniCPM-o 4.5 turn profile
(`base_config: minicpmo_4_5_turn.yaml`) and start with `# options: --gpus-per-node 1` for
validate's options, or a command line `$ omni-deploy validate FILE`. tests/validate/test_rules.py
runs every example: the one that fails must report its code, the one that passes neither it nor
any error. An example that cannot run here starts `# shown, not run by the tests: WHY` (the test
holds a short list of those).
`omni-deploy rule CODE` prints a code's page, docs/findings.md holds them all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from omni_deploy.common.codes import CODES, Code

F = TypeVar("F", bound=Callable[..., Any])
FIELDS = ("What it does", "Why", "Fails", "Passes")
EXAMPLES = ("Fails", "Passes")
_DECLARED: dict[Callable[..., Any], frozenset[str]] = {}
_HEADING = re.compile(r"^([EWI]\d{3}):$")
_FIELD = re.compile(rf"^    ({'|'.join(FIELDS)}):\s*(.*)$")


class UndeclaredCode(Exception):
    """A check reported a code it does not declare: a bug in omni-deploy (exit 3), never a finding."""


def emits(*declared: Code) -> Callable[[F], F]:
    """Declare the codes a check (or the loading step) may report."""

    def register(check: F) -> F:
        _DECLARED[check] = frozenset(code.id for code in declared)
        return check

    return register


def declared(check: Callable[..., Any]) -> frozenset[str]:
    return _DECLARED.get(check, frozenset())


def require_declared(check: Callable[..., Any], found: Iterable[str]) -> None:
    """Raise UndeclaredCode for a code `check` reported without declaring it."""
    extra = sorted(set(found) - declared(check))
    if extra:
        raise UndeclaredCode(
            f"{check.__module__}.{check.__qualname__} reported {', '.join(extra)}, which it does not "
            "declare: add the code to its @emits(...) and document it in its docstring"
        )


@dataclass(frozen=True)
class RuleDoc:
    """One code's page: what the check does, why it matters, an example that fails and one that passes."""

    code: Code
    check: str  # "omni_deploy.validate.check_capacity.check_gpu_memory"
    what: str
    why: str
    fails: str
    passes: str


def rule_docs(checks: Iterable[Callable[..., Any]]) -> dict[str, RuleDoc]:
    """Every declared code's page, parsed from its check's docstring (ValueError names what is missing)."""
    import inspect  # only for the pages, not on validate's start-up path

    pages: dict[str, RuleDoc] = {}
    for check in checks:
        name = f"{check.__module__}.{check.__qualname__}"
        sections = parse_sections(inspect.getdoc(check) or "", name)
        for code_id in sorted(declared(check)):
            if code_id in pages:
                raise ValueError(f"{code_id} is declared by {pages[code_id].check} and {name}")
            if code_id not in sections:
                raise ValueError(f"{name} declares {code_id} but its docstring does not document it")
            fields = sections[code_id]
            missing = [f for f in FIELDS if not fields.get(f)]
            if missing:
                raise ValueError(f"{name}: {code_id} lacks {', '.join(missing)}")
            pages[code_id] = RuleDoc(
                CODES[code_id], name, fields["What it does"], fields["Why"], fields["Fails"], fields["Passes"]
            )
        undeclared = sorted(set(sections) - declared(check))
        if undeclared:
            raise ValueError(f"{name} documents {', '.join(undeclared)} without declaring it")
    return pages


def parse_sections(doc: str, where: str) -> dict[str, dict[str, str]]:
    """The `E350:` sections of a docstring -> {code: {field: text}}: prose joined into one
    paragraph, examples dedented; everything before the first section is the check's own summary."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    field: str | None = None
    for line in doc.splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = sections[heading.group(1)] = {}
            field = None
        elif current is None:
            continue
        elif match := _FIELD.match(line):
            field = match.group(1)
            current[field] = [match.group(2)] if match.group(2) else []
        elif field is not None and (line.startswith(" " * 8) or not line.strip()):
            current[field].append(line[8:] if field in EXAMPLES else line.strip())
        elif line.strip():
            raise ValueError(f"{where}: unexpected line in the documentation of a code: {line!r}")
    return {code: {k: _text(k, v) for k, v in fields.items()} for code, fields in sections.items()}


def _text(field: str, lines: list[str]) -> str:
    if field in EXAMPLES:
        return "\n".join(lines).strip("\n") + "\n"
    return " ".join(line for line in lines if line).strip()

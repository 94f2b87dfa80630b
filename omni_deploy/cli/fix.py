"""`validate --fix` and `--diff` on the files validate checked: edit, validate the edit, then write.

Promises, each kept here:
- only a file that was validated as such (a FILE, or one the project or a directory stood for)
  is touched: never a base file reached through another's base_config, a bundled file found by
  its bare name, or a file inside an installed package;
- a file is written only when its fixed text loads and validates without the fixed findings;
- a write is atomic (a temporary file beside it, renamed over it: common/atomic_write.py) and keeps
  the file's owner, group and mode; only the fixed spans change, so comments, quoting, line
  endings and a BOM stay;
- stdin is never written anywhere: its fixed text is printed; unfixed, its bytes as they came
  (whatever their encoding);
- every name in what is printed (diff headers, "fixed" and "not fixed" lines) is escaped for the
  terminal (common/output/escape.py), and the diff's lines too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from omni_deploy.cli.file_args import Input
from omni_deploy.common.output.escape import for_terminal
from omni_deploy.validate.context import Options
from omni_deploy.validate.findings import Finding
from omni_deploy.validate.fixes import Edited, apply, refusal, unified_diff
from omni_deploy.validate.runner import FileReport, validate_file, validate_inputs

_BOM = "\ufeff"


@dataclass
class Plan:
    source: Input
    target: Path | None  # the file to write; None for stdin
    before: str
    edited: Edited
    after: FileReport  # the fixed text validated
    bom: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.edited.applied)


@dataclass
class Outcome:
    reports: list[FileReport]  # after the fixes: what the files now say
    inputs: list[Input]  # stdin's input holds its fixed text
    changed: bool = False  # some file changed (--fix) or would change (--diff)
    stdin_printed: bool = False  # stdout holds stdin's fixed text; the report goes to stderr
    notes: list[str] = field(default_factory=list)


def _own_file(source: Input, report: FileReport) -> Path | None:
    """The file `source` named, if --fix may write it (see the module docstring)."""
    from omni_deploy.validate.blame import installed

    if report.deployment is None:
        return None
    top = report.deployment.top
    named = Path(source.name).expanduser()
    if not named.exists() or os.path.realpath(named) != os.path.realpath(top) or installed(str(top)):
        return None
    return top


def _pairs(findings: list[Finding], file: str) -> list[Finding]:
    target = os.path.realpath(file)
    return [
        f
        for f in findings
        if f.fix is not None and f.fix.file == f.file and os.path.realpath(f.fix.file) == target
    ]


def _plan(source: Input, report: FileReport, options: Options) -> tuple[Plan | None, list[str]]:
    from omni_deploy.common.errors import ConfigError
    from omni_deploy.config.safe_read import read_bytes

    fixable = [f for f in report.findings if f.fix is not None]
    if not fixable:
        return None, []
    # The fixes of the file itself: stdin's by its name, a file's by the path it was named by, read
    # as the loader and `_own_file` read it (pathlib's expanduser: `./~/f.yaml` is ~/f.yaml); below,
    # `_own_file` holds that path to be the file validated, or refuses it.
    fixing = _pairs(report.findings, source.name if source.is_stdin else str(Path(source.name).expanduser()))
    if source.is_stdin:
        assert source.text is not None
        raw_in = source.text
        if isinstance(raw_in, bytes):  # read from a real stdin: the loader decoded it strictly already
            try:
                raw_in = raw_in.decode("utf-8")
            except UnicodeDecodeError as exc:
                return None, [f"not fixed: {source.name} is not UTF-8: {exc}"]
        bom, text = raw_in.startswith(_BOM), raw_in.removeprefix(_BOM)
        target = None
    else:
        target = _own_file(source, report)
        if target is None:
            return None, [
                f"not fixed: {source.name} is not a file of yours (bundled, or inside an installed package)"
            ]
        try:
            raw = read_bytes(target).decode("utf-8")
        except (ConfigError, UnicodeDecodeError) as exc:
            return None, [f"not fixed: cannot read {source.name} again: {exc}"]
        bom, text = raw.startswith(_BOM), raw.removeprefix(_BOM)
    notes = [
        f"not fixed: {f.file}:{f.line}:{f.column} {f.code}: {f.file} was not validated itself (name it to fix it)"
        for f in fixable
        if f not in fixing
    ]
    edited = apply(text, [f.fix for f in fixing if f.fix is not None])
    notes += [f"not fixed: {source.name}:{fix.line}:{fix.column}: {why}" for fix, why in edited.skipped]
    if not edited.applied:
        return None, notes
    after = validate_file(source.name, options, text=edited.text)
    problem = refusal(after, [f for f in fixing if f.fix in edited.applied])
    if problem is not None:
        return None, [*notes, f"not fixed: {source.name}: {problem}; the file is left as it was"]
    return Plan(source, target, text, edited, after, bom), notes


def _shown_diff(name: str, before: str, after: str) -> str:
    """The unified diff with the name and every line escaped for a terminal (common/output/escape.py)."""
    from omni_deploy.common.output.escape import diff_line

    diff = unified_diff(for_terminal(name), before, after)
    return "".join(diff_line(line) for line in diff.splitlines(keepends=True))


def _print_stdin(source: Input, plan: Plan | None, say_out: Callable[[str], None], raw_ok: bool) -> None:
    """ruff and black do the same: the fixed text, fixed or not, on stdout. Unfixed, the bytes as
    read (latin-1 stays latin-1, a BOM stays); fixed (UTF-8 only), with the BOM it had."""
    import click

    if plan is not None:
        say_out((_BOM if plan.bom else "") + plan.edited.text)
        return
    assert source.text is not None
    if isinstance(source.text, bytes) and raw_ok:
        click.echo(source.text, nl=False)
        return
    say_out(source.text if isinstance(source.text, str) else source.text.decode("utf-8", "surrogateescape"))


def fix_files(
    inputs: list[Input],
    reports: list[FileReport],
    options: Options,
    write: bool,
    out: Callable[[str], None] | None = None,
    err: Callable[[str], None] | None = None,
) -> Outcome:
    """--fix (`write`) or --diff: plan every file's fixes, then write (or show) the good ones."""
    import click

    say_out = out or (lambda text: click.echo(text, nl=False))
    say_err = err or (lambda text: click.echo(f"omni-deploy: {text}", err=True))
    plans: list[Plan] = []
    notes: list[str] = []
    for source, report in zip(inputs, reports, strict=True):
        plan, plan_notes = _plan(source, report, options)
        notes += plan_notes
        if plan is not None:
            plans.append(plan)
    for note in dict.fromkeys(notes):
        say_err(for_terminal(note))
    fixed = sum(len(p.edited.applied) for p in plans)
    if not write:
        for plan in plans:
            say_out(_shown_diff(plan.source.name, plan.before, plan.edited.text))
        say_err(f"would fix {fixed} finding(s) in {len(plans)} file(s)" if plans else "nothing to fix")
        return Outcome(reports, inputs, changed=bool(plans), notes=notes)

    from omni_deploy.common.atomic_write import KEEP, write_atomic

    for plan in plans:
        if plan.target is None:
            continue
        try:
            text = ((_BOM if plan.bom else "") + plan.edited.text).encode("utf-8")
            write_atomic(plan.target, text, link="follow", mode=KEEP, fsync=True)
        except OSError as exc:
            say_err(
                for_terminal(
                    f"not fixed: cannot write {plan.source.name}: {exc.strerror or exc}; it is left as it was"
                )
            )
            continue
        say_err(for_terminal(f"fixed {len(plan.edited.applied)} finding(s) in {plan.source.name}"))
    by_stdin = {id(p.source): p for p in plans if p.target is None}
    updated = [replace(i, text=by_stdin[id(i)].edited.text) if id(i) in by_stdin else i for i in inputs]
    stdin = next((i for i in inputs if i.is_stdin), None)
    if stdin is not None:
        _print_stdin(stdin, by_stdin.get(id(stdin)), say_out, out is None)
    # Files read one another (base_config): what each says now comes from a fresh run.
    after = validate_inputs([(i.name, i.text) for i in updated], options) if plans else reports
    return Outcome(after, updated, changed=bool(plans), stdin_printed=stdin is not None, notes=notes)

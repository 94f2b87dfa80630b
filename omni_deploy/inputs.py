"""FILE arguments as operators write them: `-` for stdin, directories, and globs the shell did not expand.

A directory stands for the deploy files below it (`*.yaml`/`*.yml`, hidden folders left out),
and so does a glob; YAML there that is not a deploy file (see knowledge/deploy_file.py) is skipped
silently, since nobody named it. A file named outright is always checked.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

STDIN = "-"
STDIN_NAME = "<stdin>"
_GLOB_CHARS = frozenset("*?[")


class InputError(ValueError):
    """A FILE argument that names nothing usable (an empty directory, a glob without matches)."""


@dataclass(frozen=True)
class Input:
    """One deploy file to read: from disk (`text` None) or from stdin (`text` set, `name` for messages)."""

    name: str
    text: str | None = None

    @property
    def is_stdin(self) -> bool:
        return self.text is not None


def _yaml_files_below(directory: Path) -> list[Path]:
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(root) / f for f in sorted(files) if f.endswith((".yaml", ".yml"))]
    return found


def deploy_files_in(paths: list[Path]) -> list[Path]:
    """The deploy files among `paths` (found, not named: other YAML is left out)."""
    from omni_deploy.knowledge.deploy_file import looks_like_deploy_file  # only for found files

    out = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            out.append(path)  # unreadable: let the loader report it
            continue
        if looks_like_deploy_file(text):
            out.append(path)
    return out


def deploy_files_below(directory: Path) -> list[Path]:
    """The deploy files below a folder (*.yaml, *.yml; hidden folders left out), sorted."""
    return deploy_files_in(_yaml_files_below(directory))


def expand(
    args: Sequence[str],
    stdin: TextIO,
    stdin_filename: str | None = None,
    excluded: Callable[[Path], bool] | None = None,
) -> list[Input]:
    """The files FILE arguments stand for, in the order given (each directory's files sorted).

    `excluded` (the project's `exclude`) leaves out files found in a directory or by a glob; a
    file named outright is always checked.
    """
    drop = excluded or (lambda _path: False)
    inputs: list[Input] = []
    for arg in args:
        if arg == STDIN:
            if any(i.is_stdin for i in inputs):
                raise InputError("'-' (stdin) can be given once")
            inputs.append(Input(stdin_filename or STDIN_NAME, stdin.read()))
            continue
        path = Path(arg).expanduser()
        if path.is_dir():
            files = [f for f in deploy_files_below(path) if not drop(f)]
            if not files:
                raise InputError(f"no deploy files (*.yaml, *.yml) in {arg}")
            inputs += [Input(str(f)) for f in files]
        elif not path.exists() and _GLOB_CHARS & set(arg):
            import glob

            matches = [Path(m) for m in sorted(glob.glob(os.path.expanduser(arg), recursive=True))]
            files = [f for f in deploy_files_in([m for m in matches if m.is_file()]) if not drop(f)]
            if not files:
                raise InputError(f"no deploy files match {arg}")
            inputs += [Input(str(f)) for f in files]
        else:
            inputs.append(Input(arg))  # a file, or a bare name looked up in the bundles
    return inputs

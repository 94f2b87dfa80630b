"""FILE arguments as operators write them: `-` for stdin, directories, and globs the shell did not expand.

A directory stands for the deploy files below it (`*.yaml`/`*.yml`, hidden folders left out),
and so does a glob; YAML there that is not a deploy file (see knowledge/deploy_file.py) is skipped
silently, since nobody named it. A file named outright is always checked.

Everything goes through omni_deploy.common.guarded: stdin is read up to the size cap (one byte more, so
the loader can say it is too big), folders and globs are walked iteratively with bounds, and a
found entry that is not a regular file (a FIFO, a link to /dev/zero) is kept for the loader to
report rather than opened here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from omni_deploy.common import guarded

STDIN = "-"
STDIN_NAME = "<stdin>"
_SUFFIXES = (".yaml", ".yml")


class InputError(ValueError):
    """A FILE argument that names nothing usable (an empty directory, a glob without matches)."""


@dataclass(frozen=True)
class Input:
    """One deploy file to read: from disk (`text` None) or from stdin (`text` what was read, at
    most one past the size cap: bytes from a real stdin, str from a text stream; `name` for
    messages). The loader decodes and checks it as it would a file."""

    name: str
    text: str | bytes | None = None
    named: bool = True  # named outright (a pipe there is read); False: found in a folder or a glob

    @property
    def is_stdin(self) -> bool:
        return self.text is not None


def _deploy_files(paths: list[Path]) -> list[Path]:
    from omni_deploy.knowledge.deploy_file import looks_like_deploy_file  # only for found files

    out = []
    for path in paths:
        try:
            text = guarded.read_text(path)
        except guarded.Refused:
            out.append(path)  # unreadable (a FIFO, too big, not UTF-8): the loader says why
            continue
        if looks_like_deploy_file(text):
            out.append(path)
    return out


def deploy_files_in(paths: list[Path]) -> list[Path]:
    """The deploy files among `paths` (found, not named: other YAML is left out)."""
    return _deploy_files(paths)


def deploy_files_below(directory: Path) -> list[Path]:
    """The deploy files below a folder (*.yaml, *.yml; hidden folders left out), sorted."""
    return _deploy_files(guarded.walk(directory, _SUFFIXES))


def _found(arg: str, paths: list[Path], what: str, drop: Callable[[Path], bool]) -> list[Input]:
    files = [f for f in _deploy_files(paths) if not drop(f)]
    if not files:
        raise InputError(f"no deploy files {what} {arg}")
    return [Input(str(f), named=False) for f in files]


def read_stdin(stream: IO[Any]) -> str | bytes:
    """stdin, never more than one past the loader's cap (so /dev/zero ends at once): its bytes
    where it has a binary buffer (strict decoding is the loader's), else the text stream's text."""
    buffer = getattr(stream, "buffer", None)
    data: str | bytes = (buffer if buffer is not None else stream).read(guarded.MAX_BYTES + 1)
    return data


def expand(
    args: Sequence[str],
    stdin: IO[Any],
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
            inputs.append(Input(stdin_filename or STDIN_NAME, read_stdin(stdin)))
            continue
        path = Path(arg).expanduser()
        try:
            if path.is_dir():
                inputs += _found(arg, guarded.walk(path, _SUFFIXES), "(*.yaml, *.yml) in", drop)
            elif not os.path.lexists(path) and guarded.has_magic(arg):
                matches = guarded.glob(os.path.expanduser(arg))
                inputs += _found(arg, [m for m in matches if not m.is_dir()], "match", drop)
            else:
                inputs.append(Input(arg))  # a file, or a bare name looked up in the bundles
        except guarded.Refused as refused:
            raise InputError(str(refused)) from None
        except OSError as exc:  # a name too long for the file system, say
            raise InputError(f"cannot use {arg}: {exc.strerror or exc}") from None
    return inputs

"""Command-line options declared on the dataclass fields they fill, as plain data.

An options dataclass is the one declaration of a command's options: each field says its flags,
help and value type in `metadata["cli"]` (through `option(...)`), its default is the option's
default, and omni_deploy/cli/options_from_dataclass.py turns the fields into Click options in
field order. Nothing here imports Click, so the pure modules that hold these dataclasses stay
free of it; a value type is named (`ValueType`), and the CLI side picks the Click type for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CLI = "cli"  # the metadata key


class OptionValueError(ValueError):
    """A `check` refused a value (the CLI reports it as a bad value of the option, exit 2)."""

    def __init__(self, why: str, hint: str | None = None) -> None:
        super().__init__(why)
        self.why, self.hint = why, hint


@dataclass(frozen=True)
class ValueType:
    """An option's value type by name (see options_from_dataclass.py for the names), with its
    arguments: `ValueType("count", (1, 1024))` is a whole number from 1 to 1024."""

    kind: str
    args: tuple[Any, ...] = ()
    keywords: tuple[tuple[str, Any], ...] = ()


def platform(*special: str) -> ValueType:
    """A platform name, any case, plus the special words (all, none, auto) this command takes."""
    return ValueType("platform", special)


def count(low: int = 0, high: int | None = None) -> ValueType:
    return ValueType("count", (low, high))


def real(low: float = 0.0, high: float | None = None, low_open: bool = False) -> ValueType:
    return ValueType("real", (low, high, low_open))


def seconds(low_open: bool = False) -> ValueType:
    """Seconds to wait: finite, not negative (more than 0 with `low_open`), at most a week."""
    return ValueType("seconds", (low_open,))


def choice(*words: str) -> ValueType:
    return ValueType("choice", words)


def path(*, as_path: bool = True, **keywords: bool) -> ValueType:
    """A file system path (`exists`, `file_okay`, `dir_okay` as Click's Path takes them); a
    pathlib.Path with `as_path`, else the string given."""
    return ValueType("path", (as_path,), tuple(sorted(keywords.items())))


PIPELINE = ValueType("pipeline")
PORT = ValueType("port")


@dataclass(frozen=True)
class Option:
    """How a field is spelled on the command line.

    `shared` names an option every command spells the same way (the CLI side builds it, with
    `shared_args`): "target_version" (args: what it is checked against, more help) or "output"
    (args: the formats; `help` is its help) or "stdin_filename". `check` sees the parsed value and returns the value
    to keep, or raises OptionValueError.
    """

    decls: tuple[str, ...]
    help: str = ""
    type: ValueType | None = None
    multiple: bool = False
    is_flag: bool = False
    show_default: bool = False
    metavar: str | None = None
    required: bool = False
    check: Callable[[Any], Any] | None = None
    shared: str | None = None
    shared_args: tuple[Any, ...] = ()


def option(
    *decls: str,
    help: str = "",
    default: Any = dataclasses.MISSING,
    type: ValueType | None = None,
    multiple: bool = False,
    is_flag: bool = False,
    show_default: bool = False,
    metavar: str | None = None,
    required: bool = False,
    check: Callable[[Any], Any] | None = None,
) -> Any:
    """A dataclass field that is also a command-line option (its default the option's default)."""
    spec = Option(decls, help, type, multiple, is_flag, show_default, metavar, required, check)
    return dataclasses.field(default=default, metadata={CLI: spec})


def shared_option(name: str, *args: Any, default: Any = None, help: str = "") -> Any:
    """A field filled by an option every command spells alike (see `Option.shared`)."""
    spec = Option((), help, shared=name, shared_args=args)
    return dataclasses.field(default=default, metadata={CLI: spec})


def cli_fields(cls: type) -> list[tuple[str, Option]]:
    """The fields of a dataclass that are options, in declaration order."""
    return [(f.name, f.metadata[CLI]) for f in dataclasses.fields(cls) if CLI in f.metadata]

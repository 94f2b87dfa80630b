"""One resolution of the settings every command shares, in one order: the project file, then the
environment, then the command line; the later wins, and `ignore` codes add up across the three.

| setting          | project file       | environment                  | option                        |
| ---------------- | ------------------ | ---------------------------- | ----------------------------- |
| target-version   | `target-version`   | `OMNI_DEPLOY_TARGET_VERSION` | `--target-version`            |
| strict           | `strict`           | `OMNI_DEPLOY_STRICT`         | `--strict/--no-strict`        |
| ignore           | `ignore`           | `OMNI_DEPLOY_IGNORE`         | `--ignore`                    |
| colour           | -                  | `NO_COLOR`, `FORCE_COLOR`    | `--color` (before or after the command) |

With none of them, the target version is the installed vllm-omni's, else the newest release.
A bad value is a usage error (exit 2) that names where it came from, whichever layer it is in.
The project (omni_deploy/cli/project.py) is found once per command, from the working directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from omni_deploy.common.numbers import terminal_size

if TYPE_CHECKING:
    from omni_deploy.cli.project import Project

ENV_TARGET_VERSION = "OMNI_DEPLOY_TARGET_VERSION"
ENV_STRICT = "OMNI_DEPLOY_STRICT"
ENV_IGNORE = "OMNI_DEPLOY_IGNORE"
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class Settings:
    project: Project
    target_version: str
    target_from: str  # where it came from, for messages: an option, a variable, a file, a default
    strict: bool
    ignore: frozenset[str]


def project() -> Project:
    """The project of this command (found once, from the working directory)."""
    from omni_deploy.cli.project import ProjectSettingsError, find

    ctx = click.get_current_context(silent=True)
    meta = ctx.find_root().meta if ctx is not None else {}
    if "omni_deploy.cli.project" not in meta:
        try:
            meta["omni_deploy.cli.project"] = find(Path.cwd())
        except ProjectSettingsError as exc:
            raise click.UsageError(str(exc)) from None
        from omni_deploy.common.output.escape import for_terminal

        for why in meta["omni_deploy.cli.project"].passed_over:  # said once, on stderr
            click.echo(f"omni-deploy: warning: project settings not applied: {for_terminal(why)}", err=True)
    found: Project = meta["omni_deploy.cli.project"]
    return found


def resolve(
    target_version: str | None = None,
    strict: bool | None = None,
    ignore: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> Settings:
    """The settings for this command: `target_version`, `strict` and `ignore` as its options gave
    them (None / empty: not given), over the environment, over the project file."""
    from omni_deploy.cli.project import parse_codes
    from omni_deploy.knowledge.versions import RELEASED

    environ = os.environ if env is None else env
    found = project()
    where = str(found.source) if found.source else "project settings"

    target, target_from = target_version, "--target-version"
    if target is None and environ.get(ENV_TARGET_VERSION, "").strip():
        target, target_from = _version(environ[ENV_TARGET_VERSION], ENV_TARGET_VERSION), ENV_TARGET_VERSION
    if target is None and found.target_version is not None:
        target, target_from = _version(found.target_version, f"{where}: target-version"), where
    if target is None:
        from omni_deploy.common.bundled import installed_version, installed_version_problem

        installed = installed_version("vllm-omni")
        problem = None if installed is not None else installed_version_problem("vllm-omni")
        if problem is not None:
            raise click.UsageError(
                f"the installed vllm-omni's metadata gives {problem}; pass --target-version"
            )
        target, target_from = (
            (installed, "installed vllm-omni") if installed else (RELEASED, "newest final release")
        )

    chosen = strict
    if chosen is None and ENV_STRICT in environ:
        chosen = _flag(environ[ENV_STRICT], ENV_STRICT)
    if chosen is None:
        chosen = found.strict

    codes = set(found.ignore)
    for text, source in [(environ.get(ENV_IGNORE, ""), ENV_IGNORE), *((t, "--ignore") for t in ignore)]:
        try:
            codes |= parse_codes(text.replace(" ", ","))
        except ValueError as exc:
            raise click.UsageError(f"{source}: {exc}") from None
    return Settings(found, target, target_from, bool(chosen), frozenset(codes))


def _version(value: str, source: str) -> str:
    from omni_deploy.cli.params import TargetVersionType

    try:
        converted: str = TargetVersionType().convert(value, None, None)
    except click.BadParameter as exc:
        raise click.UsageError(f"{source}: {exc.message}") from None
    return converted


def _flag(value: str, source: str) -> bool:
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise click.UsageError(f"{source}: {value!r} is not a truth value (use 1/0, true/false, yes/no, on/off)")


def target_version_option(what: str = "check against", more: str = "") -> Callable[[Any], Any]:
    """`--target-version` as every command spells it (its help names the other layers)."""
    from omni_deploy.cli.params import TargetVersionType

    return click.option(
        "--target-version",
        type=TargetVersionType(),
        default=None,
        help=f"vllm-omni version to {what}: a release, 'installed' or 'main' (default: "
        f"{ENV_TARGET_VERSION}, else the project settings' target-version, else the installed "
        "vllm-omni, else the newest release omni-deploy knows)." + (f" {more}" if more else ""),
    )


# --color on every command, so that it works after the command name too; the last one given wins.
def _set_color(_ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        from omni_deploy.common.output import color

        color.set_mode(value)


COLOR_HELP = "Colour: auto (on a terminal, unless NO_COLOR is set; FORCE_COLOR forces it), always or never."


def color_option(default: str | None = None) -> click.Option:
    return click.Option(
        ["--color"],
        type=click.Choice(("auto", "always", "never")),
        default=default,
        show_default=default is not None,
        expose_value=False,
        is_eager=True,
        callback=_set_color,
        help=COLOR_HELP,
    )


def add_color_option(command: click.Command) -> None:
    """Give `command` (and, for a group, each of its commands) a --color option, once."""
    if not any(p.name == "color" for p in command.params):
        command.params.append(color_option())
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_color_option(sub)


# --- the environment, range-checked once at start -------------------------------------------------

_SIZES = ("COLUMNS", "LINES", "JUPYTER_COLUMNS", "JUPYTER_LINES")
_XDG_DIRS = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")


def sanitize_environment(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Drop what no reader should see, as if unset; returns the names dropped.

    - COLUMNS and LINES (and Jupyter's) that numbers.terminal_size refuses (not ASCII digits, 0, past
      MAX_TERMINAL_SIZE): a 5,000-digit COLUMNS makes int() raise in every library that reads it
      (rich, shutil's callers); unset, the terminal says.
    - An XDG base directory that is not absolute: the XDG Base Directory spec says to ignore it
      (a relative XDG_CACHE_HOME wrote the cache into the working directory).
    Children we start inherit the cleaned environment."""
    env = os.environ if environ is None else environ
    dropped = []
    for name in _SIZES:
        value = env.get(name)
        if value is not None and terminal_size(value) is None:
            dropped.append(name)
    for name in _XDG_DIRS:
        value = env.get(name)
        if value is not None and value != "" and not os.path.isabs(value):
            dropped.append(name)
    for name in dropped:
        env.pop(name, None)
    return dropped

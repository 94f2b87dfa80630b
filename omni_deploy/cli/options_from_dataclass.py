"""Click options from an options dataclass (omni_deploy/common/cli_fields.py): one declaration,
the dataclass's; the command builds it back with `picked(cls, kwargs)`, by keyword."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from omni_deploy.cli import params
from omni_deploy.common.cli_fields import Option, OptionValueError, ValueType, cli_fields

F = TypeVar("F", bound=Callable[..., Any])


# The Click type of each value type of omni_deploy/common/cli_fields.py, from its arguments.
_TYPES: dict[str, Callable[..., click.ParamType]] = {
    "platform": lambda *special: params.PlatformType(*special),
    "pipeline": lambda: params.PipelineType(),
    "count": lambda low, high: params.Count(low, high),
    "real": lambda low, high, low_open: params.Real(low, high, low_open),
    "seconds": lambda low_open: params.seconds(low_open),
    "port": lambda: params.PORT,
    "device": lambda: params.DeviceType(),
    "choice": lambda *words: click.Choice(words),
    "path": lambda as_path, **keywords: click.Path(path_type=Path if as_path else None, **keywords),
}


def _param_type(value_type: ValueType) -> click.ParamType:
    return _TYPES[value_type.kind](*value_type.args, **dict(value_type.keywords))


def _callback(check: Callable[[Any], Any]) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        try:
            return check(value)
        except OptionValueError as refused:  # without a hint, Click names the option
            raise click.BadParameter(refused.why, ctx, param, param_hint=refused.hint) from None

    return callback


def _click_option(name: str, spec: Option, default: Any) -> Callable[[F], F]:
    if spec.shared == "target_version":
        from omni_deploy.cli.settings import target_version_option

        return target_version_option(*spec.shared_args)
    if spec.shared == "output":
        return params.output_option(spec.shared_args[0], help=spec.help)
    if spec.shared == "stdin_filename":
        from omni_deploy.cli.file_options import stdin_filename_option

        return stdin_filename_option()
    keywords: dict[str, Any] = {"help": spec.help}
    # Click's own default where the option leaves it out (a flag's False, a repeatable's ()).
    if (
        default is not dataclasses.MISSING
        and not (spec.is_flag and default is False)
        and not (spec.multiple and default == ())
    ):
        keywords["default"] = default
    if spec.type is not None:
        keywords["type"] = _param_type(spec.type)
    for key in ("multiple", "is_flag", "show_default", "required"):
        if getattr(spec, key):
            keywords[key] = True
    if spec.metavar is not None:
        keywords["metavar"] = spec.metavar
    if spec.check is not None:
        keywords["callback"] = _callback(spec.check)
    return click.option(*spec.decls, name, **keywords)  # the field's name, whatever the flags


def _field_default(cls: type, name: str) -> Any:
    for field in dataclasses.fields(cls):
        if field.name == name:
            return field.default
    raise KeyError(name)


def options_from(cls: type) -> Callable[[F], F]:
    """A decorator that adds the dataclass's options to a command, in field order (first on top)."""

    def decorate(command: F) -> F:
        for name, spec in reversed(cli_fields(cls)):
            command = _click_option(name, spec, _field_default(cls, name))(command)
        return command

    return decorate


def picked(cls: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of the dataclass's options, taken out of a command's kwargs."""
    return {name: kwargs.pop(name) for name, _spec in cli_fields(cls)}

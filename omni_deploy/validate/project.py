"""Project settings for validate, found from the working directory upwards (yamllint-style): the
first folder with a `.omni-deploy.yaml`, or a `pyproject.toml` with a `[tool.omni-deploy]` table.

    # .omni-deploy.yaml                     # pyproject.toml
    ignore: [W351, W340]                    [tool.omni-deploy]
    target-version: "0.30.0"                ignore = ["W351"]
    strict: true                            target-version = "0.30.0"
                                            strict = true
Command-line options win over the file; `--ignore` adds to its list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_deploy.errors import OmniDeployError

PROJECT_FILE = ".omni-deploy.yaml"
_CODE = re.compile(r"^[EWI]\d{3}$")
_KEYS = ("ignore", "target-version", "strict")


class ProjectSettingsError(OmniDeployError):
    """The project settings file cannot be read or holds a bad value (exit 1, no traceback)."""


@dataclass(frozen=True)
class ProjectSettings:
    source: Path | None = None  # the file the settings came from
    ignore: frozenset[str] = frozenset()
    target_version: str | None = None
    strict: bool | None = None


def find(start: Path) -> ProjectSettings:
    """The settings of the nearest folder at or above `start` that has any (none: defaults)."""
    for folder in (start.resolve(), *start.resolve().parents):
        own = folder / PROJECT_FILE
        if own.is_file():
            return _settings(own, _yaml_table(own))
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            table = _toml_table(pyproject)
            if table is not None:
                return _settings(pyproject, table)
    return ProjectSettings()


def _yaml_table(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ProjectSettingsError(f"cannot read the project settings {path}: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ProjectSettingsError(f"{path}: the project settings must be a mapping")
    return data


def _toml_table(path: Path) -> dict[str, Any] | None:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ProjectSettingsError(f"cannot read {path}: {exc}") from None
    table = data.get("tool", {}).get("omni-deploy")
    if table is not None and not isinstance(table, dict):
        raise ProjectSettingsError(f"{path}: [tool.omni-deploy] must be a table")
    return table


def _settings(path: Path, table: dict[str, Any]) -> ProjectSettings:
    unknown = sorted(set(map(str, table)) - set(_KEYS))
    if unknown:
        raise ProjectSettingsError(
            f"{path}: unknown omni-deploy setting(s) {', '.join(unknown)} (known: {', '.join(_KEYS)})"
        )
    ignore = table.get("ignore", [])
    if isinstance(ignore, str):
        ignore = [c.strip() for c in ignore.split(",") if c.strip()]
    if not isinstance(ignore, list) or not all(isinstance(c, str) and _CODE.match(c) for c in ignore):
        raise ProjectSettingsError(f"{path}: ignore must be a list of finding codes such as W351")
    target = table.get("target-version")
    if target is not None and not isinstance(target, str):
        raise ProjectSettingsError(f'{path}: target-version must be a string such as "0.30.0"')
    strict = table.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise ProjectSettingsError(f"{path}: strict must be true or false")
    return ProjectSettings(path, frozenset(ignore), target, strict)


def parse_codes(text: str) -> frozenset[str]:
    """`W351,E350` -> the codes (ValueError for anything that is not a code)."""
    codes = [c.strip().upper() for c in text.split(",") if c.strip()]
    bad = [c for c in codes if not _CODE.match(c)]
    if bad:
        raise ValueError(f"not a finding code: {', '.join(bad)}")
    return frozenset(codes)

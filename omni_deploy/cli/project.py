"""The project a command runs in: its root, its settings file, and the deploy files that are its own.

Found from the working directory upwards, as ruff and yamllint find theirs: the first folder with
a `.omni-deploy.yaml`, or a `pyproject.toml` with a `[tool.omni-deploy]` table, is the project
root; with neither, the working directory is.

    # .omni-deploy.yaml                     # pyproject.toml
    files: ["deploy/**/*.yaml"]             [tool.omni-deploy]
    exclude: ["deploy/old/**"]              files = ["deploy/**/*.yaml"]
    ignore: [W351, W340]                    ignore = ["W351"]
    target-version: "0.30.0"                target-version = "0.30.0"
    strict: true                            strict = true

The project's deploy files, for a command given no FILE: those `files` matches (globs relative to
the root), else the deploy files under `<root>/deploy/`, in both cases less those `exclude`
matches; none: the caller falls back to the bundled profile and says so. How a setting combines
with the environment and the options is cli/settings.py's business; this module only reads.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from omni_deploy.common.errors import UsageProblem

PROJECT_FILE = ".omni-deploy.yaml"
DEPLOY_DIR = "deploy"
_CODE = re.compile(r"^[EWI]\d{3}$")
KEYS = ("files", "exclude", "ignore", "target-version", "strict")
# Every spelling of the table's key ([tool.omni-deploy], [tool."omni-deploy"], tool.omni-deploy.x =,
# omni-deploy = {...} under [tool]) matches; a dependency on omni-deploy may too, costing a parse.
_MAY_HAVE_TABLE = re.compile(r"omni-deploy['\"]?\s*[].=]")


class ProjectSettingsError(UsageProblem):
    """The project settings file cannot be read or holds a bad value (a usage error: exit 2)."""


@dataclass(frozen=True)
class Project:
    root: Path  # the settings file's folder, else the working directory
    source: Path | None = None  # the settings file
    files: tuple[str, ...] | None = None  # globs relative to root; None: not set
    exclude: tuple[str, ...] = ()
    ignore: frozenset[str] = frozenset()
    target_version: str | None = None
    strict: bool | None = None
    # Settings files found but not applied (another user's, or anyone can write them), with why.
    passed_over: tuple[str, ...] = ()

    def excluded(self, path: Path) -> bool:
        """Whether `exclude` leaves this file out (a pattern matches it or a folder above it)."""
        if not self.exclude:
            return False
        try:
            relative = Path(os.path.abspath(path)).relative_to(Path(os.path.abspath(self.root)))
        except ValueError:
            return False  # outside the project: its patterns do not speak of it
        parts = relative.as_posix().split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        from omni_deploy.common.patterns import matches

        return any(matches(p.strip("/"), prefix) for p in self.exclude for prefix in prefixes)

    def deploy_files(self) -> list[Path]:
        """The project's own deploy files (see the module docstring), sorted; may be empty."""
        from omni_deploy.cli.file_args import deploy_files_below, deploy_files_in

        if self.files is not None:
            found: dict[Path, None] = {}
            for pattern in self.files:
                for path in _glob(self.root, pattern):
                    found.setdefault(path)
            return [p for p in deploy_files_in(sorted(found)) if not self.excluded(p)]
        folder = self.root / DEPLOY_DIR
        if not folder.is_dir():
            return []
        return [p for p in deploy_files_below(folder) if not self.excluded(p)]

    def describe_search(self) -> str:
        """Where deploy_files looked, for the line that says it found nothing."""
        if self.files is not None and self.source is not None:
            return f"no deploy file matches `files` of {_shown(self.source)}"
        return f"no deploy files in {_shown(self.root / DEPLOY_DIR)}/"


def _shown(path: Path | None) -> str:
    from omni_deploy.config.yaml_loader import display_path

    return display_path(path) if path is not None else ""


def _glob(root: Path, pattern: str) -> list[Path]:
    """`files` matches, walked by the guarded glob (iterative, bounded in depth and count)."""
    from omni_deploy.common import guarded

    try:  # the root is taken literally (a folder named "a[1]" is a name, not a pattern)
        return [m for m in guarded.glob(pattern, base=root) if guarded.is_readable_file(m)]
    except guarded.Refused as refused:
        raise ProjectSettingsError(f"files {pattern!r} of the project settings: {refused.why}") from None


def find(start: Path) -> Project:
    """The project of the nearest folder at or above `start` that has settings (none: `start`)."""
    here = start.resolve()
    passed: list[str] = []
    for folder in (here, *here.parents):
        for path in (folder / PROJECT_FILE, folder / "pyproject.toml"):
            if not os.path.lexists(path):  # present but unreadable (a FIFO, a /dev/zero link) is said so
                continue
            unreadable = _unreadable(path)
            if unreadable is not None:  # as ruff does: present but unreadable is an error, not a skip
                raise ProjectSettingsError(f"project settings {path}: {unreadable}")
            why = _not_ours(path)
            if why is not None:
                passed.append(f"{path}: {why}")
                continue
            table = _yaml_table(path) if path.name == PROJECT_FILE else _toml_table(path)
            if table is not None:
                return replace(_settings(folder, path, table), passed_over=tuple(passed))
    return Project(here, passed_over=tuple(passed))


def _unreadable(path: Path) -> str | None:
    """Why a settings file that is there cannot be read at all (a symlink loop, no permission, a
    link to nothing), unless the link itself is another user's (then it is passed over, below)."""
    import stat

    try:
        link = os.lstat(path)
        if stat.S_ISLNK(link.st_mode) and _untrusted_owner(link, "the link") is not None:
            return None
        os.stat(path)
    except (OSError, ValueError) as exc:
        return f"it cannot be read ({getattr(exc, 'strerror', None) or exc})"
    return None


def _not_ours(path: Path) -> str | None:
    """Why a settings file is not used: not a regular file, written by another user, or writable
    by others; for a symlink, the link and its target alike.

    Settings can switch findings off, so a `.omni-deploy.yaml` planted in a shared folder above
    the working directory (/tmp, a group share) must not apply (as git refuses a repository
    another user owns); nor may a FIFO or a folder planted under that name stop every command."""
    import stat

    try:
        link = os.lstat(path)
        info = os.stat(path)
    except (OSError, ValueError) as exc:
        return f"it cannot be read ({getattr(exc, 'strerror', None) or exc})"
    if stat.S_ISLNK(link.st_mode):
        why = _untrusted_owner(link, "the link")
        if why is not None:
            return why
    if not stat.S_ISREG(info.st_mode):
        from omni_deploy.common.guarded import kind_of

        return f"it is {kind_of(info.st_mode)}, not a regular file"
    return _untrusted_owner(info, "it")


def _untrusted_owner(info: os.stat_result, what: str) -> str | None:
    import stat

    if info.st_uid not in (os.getuid(), 0):
        return f"{what} belongs to uid {info.st_uid}, not to you"
    if info.st_mode & 0o002 and not stat.S_ISLNK(info.st_mode):  # a link's own mode is always 777
        return f"anyone can write {what}"
    return None


MAX_BYTES = 1024 * 1024  # a settings file is a few lines; a pyproject.toml a few KiB


def _read(path: Path) -> str:
    """The file through the guarded reader (regular files only, the size cap, strict UTF-8)."""
    from omni_deploy.common import guarded

    try:
        return guarded.read_text(path, str(path), MAX_BYTES)
    except guarded.Refused as refused:
        raise ProjectSettingsError(f"project settings: {refused}") from None


def _yaml_table(path: Path) -> dict[str, Any]:
    import yaml

    text = _read(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ProjectSettingsError(f"cannot read the project settings {path}: {exc}") from None
    except RecursionError:  # the constructor recurses per nesting level
        raise ProjectSettingsError(f"cannot read {path}: nested too deep to be settings") from None
    except ValueError as exc:  # an integer past Python's digit limit (int() in the constructor)
        raise ProjectSettingsError(f"cannot read the project settings {path}: {_value_error(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ProjectSettingsError(f"{path}: the project settings must be a mapping")
    return data


def _toml_table(path: Path) -> dict[str, Any] | None:
    text = _read(path)
    if not _MAY_HAVE_TABLE.search(text):
        return None  # no such table, however it is spelt: not worth a TOML parser's start-up
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProjectSettingsError(f"cannot read {path}: {exc}") from None
    except RecursionError:  # the parser recurses per nesting level
        raise ProjectSettingsError(f"cannot read {path}: nested too deep to be settings") from None
    except (
        ValueError
    ) as exc:  # an integer past Python's digit limit (TOMLDecodeError is one too, caught above)
        raise ProjectSettingsError(f"cannot read {path}: {_value_error(exc)}") from None
    tool = data.get("tool")
    if tool is None:
        return None
    if not isinstance(tool, dict):  # `tool = 5`, `[[tool]]`: not the [tool] table of PEP 518
        raise ProjectSettingsError(f"{path}: `tool` must be a table ([tool.omni-deploy]), not {_kind(tool)}")
    table = tool.get("omni-deploy")
    if table is not None and not isinstance(table, dict):
        raise ProjectSettingsError(f"{path}: [tool.omni-deploy] must be a table")
    return table


def _value_error(exc: ValueError) -> str:
    if "digit" in str(exc):
        return "an integer has more digits than any setting takes"
    return str(exc)[:200]


def _kind(value: Any) -> str:
    names = {
        list: "an array of tables",
        int: "a number",
        float: "a number",
        str: "a string",
        bool: "a boolean",
    }
    return names.get(type(value), "not a table")


def _globs(path: Path, table: dict[str, Any], key: str) -> tuple[str, ...] | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(g, str) and g.strip() for g in value):
        raise ProjectSettingsError(f'{path}: {key} must be a list of globs such as "deploy/**/*.yaml"')
    if any(Path(g).is_absolute() or ".." in Path(g).parts for g in value):
        raise ProjectSettingsError(f"{path}: {key}: globs are relative to the project root, inside it")
    from omni_deploy.common.patterns import BadPattern, check

    try:
        check(value, key)
    except BadPattern as bad:
        raise ProjectSettingsError(f"{path}: {bad}") from None
    return tuple(value)


def _settings(root: Path, path: Path, table: dict[str, Any]) -> Project:
    unknown = sorted(set(map(str, table)) - set(KEYS))
    if unknown:
        from omni_deploy.cli.params import did_you_mean

        hint = did_you_mean(unknown[0], KEYS) if len(unknown) == 1 else ""
        raise ProjectSettingsError(
            f"{path}: unknown omni-deploy setting(s) {', '.join(unknown)}{hint} (known: {', '.join(KEYS)})"
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
    files = _globs(path, table, "files")
    exclude = _globs(path, table, "exclude") or ()
    return Project(root, path, files, exclude, frozenset(ignore), target, strict)


def parse_codes(text: str) -> frozenset[str]:
    """`W351,E350` -> the codes (ValueError for anything that is not a code)."""
    codes = [c.strip().upper() for c in text.split(",") if c.strip()]
    bad = [c for c in codes if not _CODE.match(c)]
    if bad:
        raise ValueError(f"not a finding code: {', '.join(bad)}")
    return frozenset(codes)

"""Deploy files and JSON the way the config side reads them: through omni_deploy.common.guarded, with each
refusal turned into a ConfigError whose code says why (E107 unreadable, E108 encoding, E109 size).

JSON is strict here: NaN and Infinity are refused, nesting is capped, huge integers refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omni_deploy.common import codes, guarded
from omni_deploy.common.codes import Code
from omni_deploy.common.errors import ConfigError, Location

MAX_FILE_BYTES = guarded.MAX_BYTES
MAX_JSON_DEPTH = 64
_CODES: dict[str, Code] = {
    "size": codes.E109,
    "depth": codes.E109,
    "count": codes.E109,
    "encoding": codes.E108,
}


def as_config_error(refused: guarded.Refused) -> ConfigError:
    """The finding a guarded refusal is (a bad byte keeps its line and column)."""
    if refused.kind == "missing":
        return ConfigError(f"no such file: {refused.name}", Location(refused.name), code=codes.E107)
    if refused.kind == "encoding":
        return ConfigError(
            refused.why,
            Location(refused.name, refused.line, refused.column),
            code=codes.E108,
            hint="save the file as UTF-8",
        )
    return ConfigError(str(refused), Location(refused.name), code=_CODES.get(refused.kind, codes.E107))


def read_bytes(
    path: Path, name: str | None = None, limit: int = MAX_FILE_BYTES, *, named: bool = False
) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, or a ConfigError that says why not."""
    try:
        return guarded.read_bytes(path, name, limit, named=named)
    except guarded.Refused as refused:
        raise as_config_error(refused) from None


def decode_utf8(data: bytes, name: str) -> str:
    """Strict UTF-8 (a leading BOM is dropped); a bad byte is reported at its line and column."""
    try:
        return guarded.decode(data, name)
    except guarded.Refused as refused:
        raise as_config_error(refused) from None


def read_text(
    path: Path, name: str | None = None, limit: int = MAX_FILE_BYTES, *, named: bool = False
) -> str:
    name = name or str(path)
    return decode_utf8(read_bytes(path, name, limit, named=named), name)


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a JSON number")


def _depth(value: Any) -> int:
    """Nesting depth, iteratively (a recursive walk is what deep input is meant to break)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def parse_json(text: str, name: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Strict JSON: NaN/Infinity refused, nesting capped, huge integers refused, all as findings."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"not valid JSON: {exc.msg}", Location(name, exc.lineno, exc.colno), code=codes.E101
        ) from None
    except RecursionError:
        raise ConfigError(
            f"JSON nested deeper than {max_depth} levels", Location(name), code=codes.E109
        ) from None
    except ValueError as exc:  # NaN/Infinity, or an integer beyond Python's digit limit
        raise ConfigError(f"not valid JSON: {exc}", Location(name), code=codes.E101) from None
    if _depth(value) > max_depth:
        raise ConfigError(f"JSON nested deeper than {max_depth} levels", Location(name), code=codes.E109)
    return value


def read_json(path: Path, name: str | None = None, limit: int = MAX_FILE_BYTES) -> Any:
    name = name or str(path)
    return parse_json(read_text(path, name, limit), name)

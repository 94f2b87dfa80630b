"""JSON documents the commands print: every one carries `schema_version` first.

The version counts incompatible changes of the shapes written down in docs/json-output.md (a key
removed, renamed or retyped); adding a key does not change it. Consumers check it and refuse a
major version they do not know.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from omni_deploy.common.errors import OmniDeployError

SCHEMA_VERSION = 1


class JsonKeyError(OmniDeployError):
    """Two keys of one mapping would be the same JSON key (YAML's 1 and "1"): refused, not dropped."""


def json_key(key: Any) -> str:
    """A mapping key as JSON must spell it: as YAML writes it (null, true, 1, 2.5), never "None"."""
    if isinstance(key, str):
        return key
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, float) and not math.isfinite(key):
        return ".nan" if key != key else (".inf" if key > 0 else "-.inf")
    return str(key)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _utf8(text: str) -> str:
    """A string UTF-8 can hold: a byte that was not UTF-8 (a file name's, kept by Python as a lone
    surrogate U+DC80..U+DCFF) becomes the four characters `\\xNN`; any other lone surrogate
    `\\uNNNN`. JSON would otherwise write a `\\udcff` escape no strict reader accepts."""

    def visible(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"

    return _SURROGATE.sub(visible, text)


def safe(value: Any, path: str = "$") -> Any:
    """`value` as strict JSON can hold it: keys spelt as YAML spells them (two that collide are a
    JsonKeyError naming both), NaN and infinity as strings (a config can hold `.inf`), strings
    valid UTF-8 (`_utf8`)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):
        return _utf8(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        seen: dict[str, Any] = {}
        for key, item in value.items():
            spelt = json_key(key)
            if spelt in seen:
                raise JsonKeyError(
                    f"{path}: the keys {seen[spelt]!r} and {key!r} are one key in JSON; "
                    "quote them all as strings (or use -o yaml)"
                )
            seen[spelt] = key
            out[_utf8(spelt)] = safe(item, f"{path}.{spelt}")
        return out
    if isinstance(value, list | tuple):
        return [safe(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


_safe = safe


def document(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with `schema_version` as its first key (a body's own `schema_version` is replaced)."""
    return {"schema_version": SCHEMA_VERSION, **{k: v for k, v in body.items() if k != "schema_version"}}


def dumps(body: dict[str, Any]) -> str:
    return json.dumps(safe(document(body)), indent=2, default=str)

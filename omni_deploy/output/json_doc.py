"""JSON documents the commands print: every one carries `schema_version` first.

The version counts incompatible changes of the shapes written down in docs/json-output.md (a key
removed, renamed or retyped); adding a key does not change it. Consumers check it and refuse a
major version they do not know.
"""

from __future__ import annotations

import json
import math
from typing import Any

SCHEMA_VERSION = 1


def _safe(value: Any) -> Any:
    # JSON has no NaN or infinity; a config can hold `.inf` and a timing can be NaN.
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_safe(v) for v in value]
    return value


def document(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with `schema_version` as its first key (a body's own `schema_version` is replaced)."""
    return {"schema_version": SCHEMA_VERSION, **{k: v for k, v in body.items() if k != "schema_version"}}


def dumps(body: dict[str, Any]) -> str:
    return json.dumps(_safe(document(body)), indent=2, default=str)

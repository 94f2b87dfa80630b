"""Finding paths, one spelling: JSONPath (RFC 9535) into the deploy file.

    $                             the top level
    $.stages[0]                   an item by its position (as written in one file)
    $.stages[?@.stage_id==1]      the stage whose stage_id is 1 (after merging, positions change)
    $.connectors.shm.extra        plain keys, dotted
    $['odd key']                  any other key, bracketed and quoted

Build paths with these helpers only, so that validate, explain and render spell them alike.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable

ROOT = "$"
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def child(path: str, key: Hashable) -> str:
    """The path of `key` under `path`: `.name`, `[index]`, or `['odd key']`."""
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{path}[{key}]"
    text = str(key)
    if _PLAIN_KEY.match(text):
        return f"{path}.{text}"
    return f"{path}[{text!r}]"


def join(parts: Iterable[Hashable], path: str = ROOT) -> str:
    for part in parts:
        path = child(path, part)
    return path


def stage(stage_id: object, stages: str = "$.stages") -> str:
    """The stage with this stage_id in the list at `stages` (by id, not by position)."""
    return f"{stages}[?@.stage_id=={stage_id!r}]"


def connector_extra(name: Hashable) -> str:
    """A connector's `extra` mapping (where MiniCPM-o's Code2Wav options live)."""
    return join(("connectors", name, "extra"))

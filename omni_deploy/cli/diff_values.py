"""How `diff` shows a value and where it was set, for both of its forms (two files, two releases)."""

from __future__ import annotations

import json
from typing import Any


def shown_value(node: Any) -> str:
    """A value as JSON, `${oc.env:...}` as written (never resolved: no environment is read)."""
    from omni_deploy.common.output.json_doc import safe
    from omni_deploy.config.nodes import to_plain

    return json.dumps(safe(to_plain(node, unresolved=True)), default=str)


def shown_origin(node: Any) -> str:
    """Where a value was set (file:line:col, layer), safe for a terminal."""
    from omni_deploy.common.output.escape import for_terminal

    return for_terminal(node.origin)

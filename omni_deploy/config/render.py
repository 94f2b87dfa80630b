"""Write a merged config back out: YAML that vllm-omni loads to the same dict, JSON, or origins.

Values that came from `${oc.env:...}` are written as the expression (vllm-omni resolves it again
at start), so a rendered file or a run directory never holds an environment secret.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from omni_deploy.config.nodes import Map, Node, Scalar, Seq, Unresolved, to_plain
from omni_deploy.config.yaml_loader import OmegaConfLikeDumper


def _escape(value: Any) -> Any:
    """Protect literal `${` so OmegaConf does not read it as an interpolation on reload."""
    if isinstance(value, Unresolved):
        return value
    if isinstance(value, str):
        return value.replace("${", "\\${")
    if isinstance(value, dict):
        return {k: _escape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escape(v) for v in value]
    return value


def to_yaml(node: Node, header: str = "") -> str:
    body = yaml.dump(
        _escape(to_plain(node, unresolved=True)),
        Dumper=OmegaConfLikeDumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )
    return header + body


def _json_safe(value: Any) -> Any:
    from omni_deploy.common.output.json_doc import safe  # keys as YAML spells them; colliding keys refused

    return safe(value)


def to_json(node: Node) -> str:
    return json.dumps(_json_safe(to_plain(node, unresolved=True)), indent=2)


def _scalar_text(value: Any) -> str:
    text = yaml.dump([_escape(value)], Dumper=OmegaConfLikeDumper, default_flow_style=True, width=10**9)
    return text.strip()[1:-1]


def _lines(node: Node, indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    if isinstance(node, Map):
        for key, entry in node.entries.items():
            child = entry.node
            head = f"{pad}{_scalar_text(key)}:"
            if (isinstance(child, Map) and child.entries) or (isinstance(child, Seq) and child.items):
                lines.append(head)
                lines.extend(_lines(child, indent + 2))
            else:
                lines.append(f"{head} {_leaf_text(child)}  # {yaml_comment(child.origin)}")
    elif isinstance(node, Seq):
        for item in node.items:
            if (isinstance(item, Map) and item.entries) or (isinstance(item, Seq) and item.items):
                child_lines = _lines(item, indent + 2)
                child_lines[0] = f"{pad}- {child_lines[0][indent + 2 :]}"
                lines.extend(child_lines)
            else:
                lines.append(f"{pad}- {_leaf_text(item)}  # {yaml_comment(item.origin)}")
    return lines


def yaml_comment(text: object) -> str:
    from omni_deploy.common.output.escape import yaml_comment as quoted  # a file name never ends the comment

    return quoted(text)


def _leaf_text(node: Node) -> str:
    if isinstance(node, Map):
        return "{}"
    if isinstance(node, Seq):
        return "[]"
    assert isinstance(node, Scalar)
    return _scalar_text(Unresolved(node.expression) if node.expression is not None else node.value)


def to_yaml_with_origins(node: Map, header: str = "") -> str:
    """YAML with each leaf's origin as a trailing comment, still loadable as YAML."""
    return header + "\n".join(_lines(node, 0)) + "\n"

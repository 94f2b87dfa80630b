"""Manifests as text: multi-document YAML (what `kubectl apply -f -` takes) or a JSON v1 List."""

from __future__ import annotations

import json
from typing import Any

import yaml

from omni_deploy.common.yaml_quoting import reinterpreted


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True  # no &anchors: every object reads on its own, as kubectl prints them


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # Files and scripts stay readable: multi-line strings as literal blocks. A string kubectl's
    # YAML 1.1 parser would read as another type (y, N, 0o17, 1:20) is quoted.
    style = "|" if "\n" in value else ("'" if reinterpreted(value) else None)
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(objects: list[dict[str, Any]]) -> str:
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100)


def to_json(objects: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2) + "\n"

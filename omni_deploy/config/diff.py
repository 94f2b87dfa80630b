"""The effective difference of two merged deploy configs, leaf by leaf, with where each side came from.

Stage lists are compared by `stage_id`, not by position, because vllm-omni merges and applies
platform sections by stage id: moving a stage in the file changes nothing the server sees, and
an index-based diff would report every key of both stages as changed. A list of scalars is one
value (`devices: [0, 1]` against `[0]` is one change, not an added item).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any

from omni_deploy.common import jsonpath
from omni_deploy.config.nodes import Map, Node, Origin, Scalar, Seq, to_plain

CHANGED, ADDED, REMOVED = "changed", "added", "removed"


@dataclass(frozen=True)
class Change:
    """One leaf that differs: `a`/`b` are None where the leaf exists on one side only."""

    path: str
    kind: str
    a: Node | None
    b: Node | None

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "a": _side(self.a), "b": _side(self.b)}


def origin_dict(origin: Origin) -> dict[str, Any] | None:
    """An origin as JSON: file, 1-based line and column, layer; None for a default."""
    if origin.layer == "default":
        return None
    return {"file": origin.file, "line": origin.line, "column": origin.column, "layer": origin.layer}


def _side(node: Node | None) -> dict[str, Any] | None:
    if node is None:
        return None
    return {
        "value": to_plain(node, unresolved=True),
        "origin": origin_dict(node.origin),
    }  # ${oc.env:...} as written


def _stage_key(items: list[Node]) -> dict[Hashable, Node] | None:
    """Items keyed by stage_id when every item is a mapping with a distinct scalar stage_id."""
    keyed: dict[Hashable, Node] = {}
    for item in items:
        sid = item.get("stage_id") if isinstance(item, Map) else None
        if not isinstance(sid, Scalar) or sid.value is None or sid.value in keyed:
            return None
        keyed[sid.value] = item
    return keyed


def _is_leaf(node: Node) -> bool:
    if isinstance(node, Map):
        return not node.entries
    if isinstance(node, Seq):
        return all(isinstance(item, Scalar) for item in node.items)
    return True


def _children(node: Map | Seq, path: str) -> dict[Hashable, tuple[str, Node]]:
    if isinstance(node, Map):
        return {key: (jsonpath.child(path, key), child) for key, child in node.items()}
    keyed = _stage_key(node.items)
    if keyed is not None:
        return {("stage_id", sid): (jsonpath.stage(sid, path), item) for sid, item in keyed.items()}
    return {index: (jsonpath.child(path, index), item) for index, item in enumerate(node.items)}


def _leaves(node: Node, path: str) -> Iterator[tuple[str, Node]]:
    if _is_leaf(node):
        yield path, node
        return
    assert isinstance(node, Map | Seq)
    for child_path_, child in _children(node, path).values():
        yield from _leaves(child, child_path_)


def _walk(a: Node, b: Node, path: str) -> Iterator[Change]:
    same_kind = type(a) is type(b) and not _is_leaf(a) and not _is_leaf(b)
    if not same_kind:
        if to_plain(a) != to_plain(b) or type(to_plain(a)) is not type(to_plain(b)):
            yield Change(path, CHANGED, a, b)
        return
    assert isinstance(a, Map | Seq) and isinstance(b, Map | Seq)
    left, right = _children(a, path), _children(b, path)
    if (
        isinstance(a, Seq)
        and isinstance(b, Seq)
        and (_stage_key(a.items) is None) != (_stage_key(b.items) is None)
    ):
        yield Change(path, CHANGED, a, b)  # one side is a stage list, the other is not
        return
    for key, (child, node) in left.items():
        if key in right:
            yield from _walk(node, right[key][1], child)
        else:
            yield from (Change(p, REMOVED, leaf, None) for p, leaf in _leaves(node, child))
    for key, (child, node) in right.items():
        if key not in left:
            yield from (Change(p, ADDED, None, leaf) for p, leaf in _leaves(node, child))


def diff_configs(a: Map, b: Map) -> list[Change]:
    """Every leaf whose effective value differs between `a` and `b`, in the order of `a`, then `b`."""
    return list(_walk(a, b, jsonpath.ROOT))

"""Positioned YAML values: every mapping key and value knows the file, line and column it came from.

The merge functions work on these nodes so that the merged result still knows, leaf by leaf,
which file and which layer (base, overlay, platform section) set each value.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

from omni_deploy.common import jsonpath
from omni_deploy.common.errors import Location


@dataclass(frozen=True)
class Origin:
    """Where a value was written: file, 1-based line and column, and the layer of the merge."""

    file: str
    line: int
    column: int
    layer: str = "file"

    @property
    def location(self) -> Location:
        return Location(self.file, self.line, self.column)

    def __str__(self) -> str:
        if self.layer == "default":
            return "default"
        return f"{self.file}:{self.line}:{self.column} ({self.layer})"


DEFAULT_ORIGIN = Origin("<default>", 0, 0, "default")


class Unresolved(str):
    """An interpolation written back as the user wrote it (`${oc.env:HF_TOKEN}`), never its value."""


@dataclass
class Scalar:
    value: Any
    origin: Origin
    # The text as written when the value came from `${oc.env:...}`: shown and rendered instead of
    # the value, so an environment secret never reaches output, messages or the run directory.
    expression: str | None = None


@dataclass
class Seq:
    items: list[Node]
    origin: Origin


@dataclass
class Entry:
    """A mapping entry: the key's own position and the value node."""

    key_origin: Origin
    node: Node


@dataclass
class Map:
    entries: dict[Hashable, Entry] = field(default_factory=dict)
    origin: Origin = DEFAULT_ORIGIN

    def get(self, key: Hashable) -> Node | None:
        entry = self.entries.get(key)
        return entry.node if entry is not None else None

    def __contains__(self, key: object) -> bool:
        return key in self.entries

    def keys(self) -> list[Hashable]:
        return list(self.entries)

    def items(self) -> Iterator[tuple[Hashable, Node]]:
        for key, entry in self.entries.items():
            yield key, entry.node

    def copy(self) -> Map:
        return Map(dict(self.entries), self.origin)

    def set(self, key: Hashable, node: Node, key_origin: Origin | None = None) -> None:
        self.entries[key] = Entry(key_origin or node.origin, node)

    def pop(self, key: Hashable) -> Entry | None:
        return self.entries.pop(key, None)


Node: TypeAlias = Scalar | Seq | Map


def is_falsy(node: Node | None) -> bool:
    """Python truthiness of the plain value, as upstream's `if not x` sees it."""
    if node is None:
        return True
    if isinstance(node, Scalar):
        return not node.value
    if isinstance(node, Seq):
        return not node.items
    return not node.entries


def to_plain(node: Node | None, unresolved: bool = False) -> Any:
    """The plain value; with `unresolved`, environment interpolations stay as written."""
    if node is None:
        return None
    if isinstance(node, Scalar):
        if unresolved and node.expression is not None:
            return Unresolved(node.expression)
        return node.value
    if isinstance(node, Seq):
        return [to_plain(item, unresolved) for item in node.items]
    return {key: to_plain(entry.node, unresolved) for key, entry in node.entries.items()}


def shown(node: Scalar) -> Any:
    """What output may show of a scalar: its `${oc.env:...}` expression when it came from the
    environment, else its value (omni_deploy/common/redact.py states the rule)."""
    return node.expression if node.expression is not None else node.value


def env_values(node: Node) -> dict[str, str]:
    """Text of every value that came from the environment -> the expression that stands for it."""
    out: dict[str, str] = {}
    for _, leaf in iter_leaves(node):
        if isinstance(leaf, Scalar) and leaf.expression is not None and leaf.value is not None:
            out[str(leaf.value)] = leaf.expression
    return out


def from_plain(value: Any, origin: Origin) -> Node:
    """Wrap a plain value (a default, an interpolation result) with one origin for all of it."""
    if isinstance(value, dict):
        return Map({k: Entry(origin, from_plain(v, origin)) for k, v in value.items()}, origin)
    if isinstance(value, list):
        return Seq([from_plain(v, origin) for v in value], origin)
    return Scalar(value, origin)


def retag(node: Node, layer: str) -> Node:
    """A copy of the tree with every origin's layer set to `layer`."""
    origin = replace(node.origin, layer=layer)
    if isinstance(node, Scalar):
        return Scalar(node.value, origin, node.expression)
    if isinstance(node, Seq):
        return Seq([retag(item, layer) for item in node.items], origin)
    return Map(
        {
            key: Entry(replace(entry.key_origin, layer=layer), retag(entry.node, layer))
            for key, entry in node.entries.items()
        },
        origin,
    )


child_path = jsonpath.child  # one spelling of paths: omni_deploy/common/jsonpath.py


def iter_leaves(node: Node, path: str = "$") -> Iterator[tuple[str, Node]]:
    """Every leaf with its path; an empty mapping or list counts as a leaf."""
    if isinstance(node, Map) and node.entries:
        for key, child in node.items():
            yield from iter_leaves(child, child_path(path, key))
    elif isinstance(node, Seq) and node.items:
        for index, item in enumerate(node.items):
            yield from iter_leaves(item, child_path(path, index))
    else:
        yield path, node


def locate(root: Node, path: list[Hashable]) -> tuple[Node | None, Origin | None]:
    """The node at `path` and the origin of the key that holds it (None where the path breaks)."""
    node: Node | None = root
    key_origin: Origin | None = None
    for part in path:
        if isinstance(node, Map) and part in node.entries:
            entry = node.entries[part]
            node, key_origin = entry.node, entry.key_origin
        elif isinstance(node, Seq) and isinstance(part, int) and 0 <= part < len(node.items):
            node = node.items[part]
            key_origin = node.origin
        else:
            return None, key_origin
    return node, key_origin


def stage_path(stages: str, index: int, stage: Map) -> str:
    """Item `index` of the stage list at `stages`, by its stage_id (the one convention of finding
    paths), by position only where it has no integer stage_id."""
    sid = stage.get("stage_id")
    if isinstance(sid, Scalar) and isinstance(sid.value, int) and not isinstance(sid.value, bool):
        return jsonpath.stage(sid.value, stages)
    return jsonpath.child(stages, index)


def path_string(path: list[Hashable], root: Node | None = None) -> str:
    """The JSONPath of `path`; with `root`, an item of a `stages` list is named by its stage_id
    (`$.stages[?@.stage_id==2]`), as every finding names a stage, where it has one."""
    out = jsonpath.ROOT
    node: Node | None = root
    for index, part in enumerate(path):
        item = (
            node.items[part]
            if isinstance(node, Seq) and isinstance(part, int) and 0 <= part < len(node.items)
            else None
        )
        if isinstance(item, Map) and path[index - 1 : index] == ["stages"]:
            out = stage_path(out, part, item)  # type: ignore[arg-type]  # an int: item was found by it
        else:
            out = jsonpath.child(out, part)
        if item is not None:
            node = item
        elif isinstance(node, Map):
            node = node.get(part) if isinstance(part, str) else None
        else:
            node = None
    return out

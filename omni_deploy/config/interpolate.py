"""OmegaConf-style `${...}` interpolation, resolved per file before any merge (as vllm-omni does).

Supported: absolute (`${a.b}`, `${a.0}`) and relative (`${.sibling}`, `${..uncle}`) references
inside the same file, `${oc.env:NAME}` and `${oc.env:NAME,default}`, text around references, and
`\\${` as a literal. Anything else (other resolvers, nested interpolation) is reported as a finding
that cannot be checked rather than guessed at.

Each node is resolved once (references to it reuse the result), a chain of references may be
MAX_DEPTH long, and the text interpolation produces is capped, so `${a}${a}${a}...` ten levels deep
is a finding in milliseconds, not an exponential run. A value that came from `${oc.env:...}` keeps
its expression, so output and messages show the expression, never the environment's value.
"""

from __future__ import annotations

import re
from collections.abc import Hashable

from omni_deploy.common import codes
from omni_deploy.common.errors import ConfigError
from omni_deploy.config.nodes import Entry, Map, Node, Scalar, Seq

MAX_DEPTH = 32  # references that lead to references
MAX_STRING = 64 * 1024  # characters in one interpolated value
MAX_TOTAL = 1024 * 1024  # characters interpolation may produce in one file

_REF = re.compile(r"(?<!\\)\$\{([^${}]*)\}")
_ESCAPED = "\\${"


def _has_interpolation(text: str) -> bool:
    return "${" in text.replace(_ESCAPED, "")


class _Resolver:
    def __init__(self, root: Map, env: dict[str, str]) -> None:
        self.root = root
        self.env = env
        self.active: set[int] = set()
        self.done: dict[int, Node] = {}
        self.produced = 0

    def fail(self, node: Scalar, why: str) -> ConfigError:
        text = node.value if len(node.value) <= 80 else node.value[:77] + "..."
        return ConfigError(
            f"interpolation {text!r} {why}",
            node.origin.location,
            code=codes.E106,
            hint="omni-deploy resolves ${path} and ${oc.env:VAR[,default]} as OmegaConf does; "
            "write the value literally so it can be checked",
        )

    def lookup(self, node: Scalar, expr: str, parents: list[Node]) -> Node:
        trail: list[Node]
        if expr.startswith("."):
            dots = len(expr) - len(expr.lstrip("."))
            if dots > len(parents):
                raise self.fail(node, "climbs above the top of the file")
            start = len(parents) - dots
            current: Node = parents[start]
            trail, rest = list(parents[:start]), expr[dots:]
        else:
            current, trail, rest = self.root, [], expr
        for part in [p for p in re.split(r"\.|\[|\]", rest) if p != ""]:
            trail.append(current)
            if isinstance(current, Map):
                key: Hashable = part
                if part not in current and part.isdigit() and int(part) in current:
                    key = int(part)
                child = current.get(key)
            elif isinstance(current, Seq) and part.isdigit() and int(part) < len(current.items):
                child = current.items[int(part)]
            else:
                child = None
            if child is None:
                raise self.fail(node, f"refers to {expr!r}, which this file does not define")
            current = child
        return self.resolve(current, trail)

    def evaluate(self, node: Scalar, expr: str, parents: list[Node]) -> Node:
        """The node a `${expr}` stands for; an environment value carries its expression."""
        expr = expr.strip()
        if expr.startswith("oc.env:"):
            name, _, default = expr[len("oc.env:") :].partition(",")
            name = name.strip()
            if name in self.env:
                value: str | None = self.env[name]
            elif not _:
                raise self.fail(node, f"needs environment variable {name}, which is not set")
            else:
                default = default.strip().strip("'\"")
                value = None if default == "null" else default
            return Scalar(value, node.origin, "${" + expr + "}")
        if ":" in expr or not expr:
            raise self.fail(node, "uses a resolver omni-deploy cannot evaluate")
        return self.lookup(node, expr, parents)

    def charge(self, node: Scalar, text: str, nodes: int = 0) -> str:
        """Count what interpolation produces: characters, and values copied by reference."""
        self.produced += len(text) + nodes
        if len(text) > MAX_STRING or self.produced > MAX_TOTAL:
            raise self.fail(node, f"expands beyond {MAX_STRING} characters (or {MAX_TOTAL} in the file)")
        return text

    def resolve(self, node: Node, parents: list[Node]) -> Node:
        key = id(node)
        if key in self.done:
            return self.done[key]
        if key in self.active:
            if isinstance(node, Scalar):
                raise self.fail(node, "refers to itself")
            raise ConfigError(
                "an interpolation refers to a mapping or list that contains it",
                node.origin.location,
                code=codes.E106,
            )
        if len(self.active) >= MAX_DEPTH:
            where = node if isinstance(node, Scalar) else Scalar("${...}", node.origin)
            raise self.fail(where, f"leads through more than {MAX_DEPTH} references")
        self.active.add(key)
        try:
            result = self._resolve(node, parents)
        finally:
            self.active.discard(key)
        self.done[key] = result
        return result

    def _resolve(self, node: Node, parents: list[Node]) -> Node:
        if isinstance(node, Map):
            out = Map({}, node.origin)
            for key, entry in node.entries.items():
                out.entries[key] = Entry(entry.key_origin, self.resolve(entry.node, [*parents, node]))
            return out
        if isinstance(node, Seq):
            return Seq([self.resolve(item, [*parents, node]) for item in node.items], node.origin)
        if not isinstance(node.value, str) or "${" not in node.value:
            return node
        text = node.value
        if not _has_interpolation(text):
            return Scalar(text.replace(_ESCAPED, "${"), node.origin)
        if _has_interpolation(_REF.sub("", text)):
            raise self.fail(node, "is nested or malformed")
        whole = _REF.fullmatch(text)
        if whole:
            target = self.evaluate(node, whole.group(1), parents)
            if not isinstance(target, Scalar):
                self.charge(node, "", _count(target))
            return _moved(target, node)
        return self._interpolated(node, text, parents)

    def _interpolated(self, node: Scalar, text: str, parents: list[Node]) -> Scalar:
        """Text with references inside it: each replaced by its value as text."""
        pieces: list[str] = []
        shown: list[str] = []  # the same text with environment references left as written
        from_env = False
        pos = 0
        for match in _REF.finditer(text):
            literal = text[pos : match.start()]
            target = self.evaluate(node, match.group(1), parents)
            value = self.charge(node, str(_plain(target)))
            pieces += [literal.replace(_ESCAPED, "${"), value]
            if isinstance(target, Scalar) and target.expression is not None:
                from_env = True
                shown += [literal, match.group(0)]
            else:
                shown += [literal, value.replace("${", _ESCAPED)]
            pos = match.end()
        tail = text[pos:]
        return Scalar(
            self.charge(node, "".join([*pieces, tail.replace(_ESCAPED, "${")])),
            node.origin,
            "".join([*shown, tail]) if from_env else None,
        )


def _plain(node: Node) -> object:
    if isinstance(node, Scalar):
        return node.value
    if isinstance(node, Seq):
        return [_plain(item) for item in node.items]
    return {key: _plain(entry.node) for key, entry in node.entries.items()}


def _count(node: Node) -> int:
    if isinstance(node, Scalar):
        return 1
    if isinstance(node, Seq):
        return 1 + sum(_count(item) for item in node.items)
    return 1 + sum(_count(entry.node) for entry in node.entries.values())


def _moved(node: Node, at: Scalar) -> Node:
    """A resolved node placed where the interpolation was written (its origin, its expressions)."""
    if isinstance(node, Scalar):
        return Scalar(node.value, at.origin, node.expression)
    if isinstance(node, Seq):
        return Seq([_moved(item, at) for item in node.items], at.origin)
    return Map({k: Entry(at.origin, _moved(e.node, at)) for k, e in node.entries.items()}, at.origin)


def resolve_interpolations(root: Map, env: dict[str, str]) -> Map:
    """Return the tree with every `${...}` resolved; raise ConfigError where that cannot be done."""
    resolved = _Resolver(root, env).resolve(root, [])
    assert isinstance(resolved, Map)
    return resolved

"""OmegaConf-style `${...}` interpolation, resolved per file before any merge (as vllm-omni does).

Supported: absolute (`${a.b}`, `${a.0}`) and relative (`${.sibling}`, `${..uncle}`) references
inside the same file, `${oc.env:NAME}` and `${oc.env:NAME,default}`, text around references, and
`\\${` as a literal. Anything else (other resolvers, nested interpolation) is reported as a finding
that cannot be checked rather than guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Hashable

from omni_deploy import codes
from omni_deploy.config.nodes import Entry, Map, Node, Scalar, Seq, from_plain, to_plain
from omni_deploy.errors import ConfigError

_REF = re.compile(r"(?<!\\)\$\{([^${}]*)\}")
_ESCAPED = "\\${"


def _has_interpolation(text: str) -> bool:
    return "${" in text.replace(_ESCAPED, "")


class _Resolver:
    def __init__(self, root: Map, env: dict[str, str]) -> None:
        self.root = root
        self.env = env
        self.active: set[int] = set()

    def fail(self, node: Scalar, why: str) -> ConfigError:
        return ConfigError(
            f"interpolation {node.value!r} {why}",
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

    def evaluate(self, node: Scalar, expr: str, parents: list[Node]) -> object:
        expr = expr.strip()
        if expr.startswith("oc.env:"):
            name, _, default = expr[len("oc.env:") :].partition(",")
            name = name.strip()
            if name in self.env:
                return self.env[name]
            if not _:
                raise self.fail(node, f"needs environment variable {name}, which is not set")
            default = default.strip().strip("'\"")
            return None if default == "null" else default
        if ":" in expr or not expr:
            raise self.fail(node, "uses a resolver omni-deploy cannot evaluate")
        return to_plain(self.lookup(node, expr, parents))

    def resolve(self, node: Node, parents: list[Node]) -> Node:
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
        if id(node) in self.active:
            raise self.fail(node, "refers to itself")
        self.active.add(id(node))
        if _has_interpolation(_REF.sub("", text)):
            raise self.fail(node, "is nested or malformed")
        try:
            whole = _REF.fullmatch(text)
            if whole:
                return from_plain(self.evaluate(node, whole.group(1), parents), node.origin)
            pieces: list[str] = []
            pos = 0
            for match in _REF.finditer(text):
                pieces.append(text[pos : match.start()])
                pieces.append(str(self.evaluate(node, match.group(1), parents)))
                pos = match.end()
            pieces.append(text[pos:])
            return Scalar("".join(pieces).replace(_ESCAPED, "${"), node.origin)
        finally:
            self.active.discard(id(node))


def resolve_interpolations(root: Map, env: dict[str, str]) -> Map:
    """Return the tree with every `${...}` resolved; raise ConfigError where that cannot be done."""
    resolved = _Resolver(root, env).resolve(root, [])
    assert isinstance(resolved, Map)
    return resolved

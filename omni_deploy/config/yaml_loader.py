"""Load one YAML file into positioned nodes, reading scalars exactly as vllm-omni does.

vllm-omni loads deploy files with OmegaConf, whose loader is PyYAML's SafeLoader (YAML 1.1:
`on`/`off`/`yes`/`no` are booleans) plus two changes: `1e3` without a dot is a float, and
timestamps stay strings. OmegaConf refuses duplicate keys; we refuse them too and name both lines.
Only the standard tags are accepted, so a `!!python/...` tag is reported and never constructed.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

import yaml

from omni_deploy.common import codes
from omni_deploy.common.errors import ConfigError, Location
from omni_deploy.config.interpolate import resolve_interpolations
from omni_deploy.config.nodes import Entry, Map, Node, Origin, Scalar, Seq, Unresolved
from omni_deploy.config.safe_read import MAX_FILE_BYTES, decode_utf8, read_text

_FLOAT = re.compile(
    r"""^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9][0-9_]*(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
    re.X,
)


def _without_timestamps(resolvers: dict[Any, Any]) -> dict[Any, Any]:
    return {
        first: [(tag, rx) for tag, rx in entries if tag != "tag:yaml.org,2002:timestamp"]
        for first, entries in resolvers.items()
    }


class OmegaConfLikeLoader(yaml.SafeLoader):
    """SafeLoader with OmegaConf's scalar resolution."""


OmegaConfLikeLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
OmegaConfLikeLoader.yaml_implicit_resolvers = _without_timestamps(OmegaConfLikeLoader.yaml_implicit_resolvers)


class OmegaConfLikeDumper(yaml.SafeDumper):
    """A dumper that quotes every string the loader above would read as another type."""


OmegaConfLikeDumper.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
OmegaConfLikeDumper.add_representer(Unresolved, yaml.SafeDumper.represent_str)


def display_path(path: Path) -> str:
    """A path as people want to read it: relative to the cwd when it lies below it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


def _mark_location(file: str, mark: Any) -> Location:
    if mark is None:
        return Location(file)
    return Location(file, mark.line + 1, mark.column + 1)


# Budgets: real deploy files have a few hundred nodes, nesting below 10 and a handful of aliases.
# Each limit stops hostile input (billion laughs, `[[[[...]]]]`) long before time or memory runs out.
MAX_DEPTH = 64
MAX_NODES = 100_000
MAX_ALIAS_EXPANSIONS = 10_000
# vllm-omni's numeric fields are at most 64-bit.
INT_LIMIT = 2**63 - 1

_SCALAR_TAGS = frozenset("tag:yaml.org,2002:" + n for n in ("str", "int", "float", "bool", "null"))
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_INT_TAG = "tag:yaml.org,2002:int"
_INT_DIGITS = 64  # longer than any 64-bit integer in any YAML 1.1 base; checked before int()


class _BudgetExceeded(Exception):
    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


class GuardedLoader(OmegaConfLikeLoader):
    """The loader with a nesting limit in the (recursive) composer."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _BudgetExceeded(f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _tag_name(tag: str) -> str:
    return "!!" + tag.rsplit(":", 1)[1] if tag.startswith("tag:yaml.org,2002:") else tag


class _Builder:
    def __init__(self, loader: OmegaConfLikeLoader, file: str) -> None:
        self.loader = loader
        self.file = file
        self.nodes = 0
        self.expansions = 0
        self.built: set[int] = set()
        self.active: set[int] = set()

    def origin(self, node: yaml.Node) -> Origin:
        mark = node.start_mark
        return Origin(self.file, mark.line + 1, mark.column + 1)

    def _count(self, node: yaml.Node) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _BudgetExceeded(f"more than {MAX_NODES} values once aliases are expanded", node.start_mark)
        if id(node) in self.built:
            self.expansions += 1
            if self.expansions > MAX_ALIAS_EXPANSIONS:
                raise _BudgetExceeded(f"more than {MAX_ALIAS_EXPANSIONS} alias expansions", node.start_mark)
        self.built.add(id(node))

    def _check_tag(self, node: yaml.Node) -> None:
        expected = (
            {_MAP_TAG}
            if isinstance(node, yaml.MappingNode)
            else {_SEQ_TAG}
            if isinstance(node, yaml.SequenceNode)
            else _SCALAR_TAGS
        )
        if node.tag in expected:
            return
        if "python/" in node.tag:
            message = f"unsupported Python object tag {node.tag!r}: deploy files allow plain YAML only"
        elif node.tag == "tag:yaml.org,2002:timestamp":
            message = "unsupported tag !!timestamp: OmegaConf holds no dates; quote the value as text"
        elif node.tag in _SCALAR_TAGS | {_MAP_TAG, _SEQ_TAG}:
            message = f"tag {_tag_name(node.tag)} cannot be put on a {type(node).__name__[:-4].lower()}"
        else:
            message = f"unsupported tag {node.tag!r}: deploy files allow plain YAML only"
        raise ConfigError(
            message,
            self.origin(node).location,
            code=codes.E103,
            hint="vllm-omni loads deploy files safely and would refuse this too",
        )

    def _too_big(self, node: yaml.Node) -> ConfigError:
        text = str(node.value)
        shown = text if len(text) <= 24 else f"{text[:12]}...({len(text)} characters)"
        return ConfigError(
            f"integer {shown} is beyond 64 bits",
            self.origin(node).location,
            code=codes.E114,
            hint="vllm-omni's numeric settings are 64-bit at most",
        )

    def scalar(self, node: yaml.Node) -> Any:
        """Construct one scalar; bad tagged values, huge numbers and unencodable text are findings."""
        self._check_tag(node)
        if node.tag == _INT_TAG and len(str(node.value).lstrip("+-").replace("_", "")) > _INT_DIGITS:
            raise self._too_big(node)
        try:
            value = self.loader.construct_object(node, deep=True)
        except (ValueError, KeyError, TypeError, OverflowError, yaml.YAMLError):
            raise ConfigError(
                f"{str(node.value)[:40]!r} is not a valid {_tag_name(node.tag)}",
                self.origin(node).location,
                code=codes.E103,
            ) from None
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT_LIMIT:
            raise self._too_big(node)
        if isinstance(value, float) and math.isinf(value) and "inf" not in str(node.value).lower():
            raise ConfigError(
                f"number {str(node.value)[:40]!r} is too large for a float",
                self.origin(node).location,
                code=codes.E114,
            )
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ConfigError(
                    f"text holds a lone surrogate (U+{ord(value[exc.start]):04X}), which is not a character",
                    self.origin(node).location,
                    code=codes.E108,
                ) from None
        return value

    def build(self, node: yaml.Node) -> Node:
        if id(node) in self.active:
            raise _BudgetExceeded("an alias refers to a node that contains it", node.start_mark)
        self._count(node)
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                self._check_tag(node)
                return self.build_map(node)
            if isinstance(node, yaml.SequenceNode):
                self._check_tag(node)
                return Seq([self.build(item) for item in node.value], self.origin(node))
            return Scalar(self.scalar(node), self.origin(node))
        finally:
            self.active.discard(id(node))

    def key(self, key_node: yaml.Node) -> Any:
        if not isinstance(key_node, yaml.ScalarNode):
            raise ConfigError(
                "mapping keys must be plain scalars", self.origin(key_node).location, code=codes.E105
            )
        return self.scalar(key_node)

    def merged(self, value_node: yaml.Node) -> list[tuple[Any, Entry]]:
        """The pairs a `<<` brings in, as PyYAML's flatten_mapping orders them (earlier sources win)."""
        if isinstance(value_node, yaml.MappingNode):
            sources = [value_node]
        elif isinstance(value_node, yaml.SequenceNode):
            sources = list(reversed(value_node.value))
        else:
            sources = []
        if not sources or any(not isinstance(source, yaml.MappingNode) for source in sources):
            raise ConfigError(
                "<< must merge a mapping or a list of mappings",
                self.origin(value_node).location,
                code=codes.E105,
            )
        pairs: list[tuple[Any, Entry]] = []
        for source in sources:
            built = self.build(source)
            assert isinstance(built, Map)
            pairs.extend(built.entries.items())
        return pairs

    def build_map(self, node: yaml.MappingNode) -> Map:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.key(key_node)
            if key in seen:
                first = seen[key].start_mark.line + 1
                raise ConfigError(
                    f"duplicate key {key!r} (first set on line {first}); YAML loaders keep only one of them",
                    self.origin(key_node).location,
                    code=codes.E102,
                    hint=f"remove one of the two, on line {first} or line {key_node.start_mark.line + 1}",
                )
            seen[key] = key_node
        # `<<` merge keys: merged pairs first so that own keys win, later ones over earlier ones.
        pairs: list[tuple[Any, Entry]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                pairs.extend(self.merged(value_node))
        for key_node, value_node in node.value:
            if key_node.tag != _MERGE_TAG:
                pairs.append((self.key(key_node), Entry(self.origin(key_node), self.build(value_node))))
        entries: dict[Any, Entry] = {}
        for key, entry in pairs:
            entries.pop(key, None)
            entries[key] = entry
        return Map(entries, self.origin(node))


def _position(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def parse_text(text: str, file: str) -> Map:
    """Parse YAML text into a positioned top-level mapping (an empty document is `{}`).

    Every failure is a ConfigError at file:line:col: reader (control characters), scanner,
    parser, composer and constructor errors, and the budgets above.
    """
    try:
        loader = GuardedLoader(text)
    except yaml.reader.ReaderError as exc:
        line, column = _position(text, exc.position)
        raise ConfigError(
            f"control character U+{exc.character:04X} is not allowed in YAML"
            if isinstance(exc.character, int)
            else f"unreadable character: {exc.reason}",
            Location(file, line, column),
            code=codes.E108,
            hint="remove it, or write it as an escape inside a double-quoted string",
        ) from None
    try:
        try:
            root = loader.get_single_node()
            if root is None:
                return Map({}, Origin(file, 1, 1))
            tree = _Builder(loader, file).build(root)
        except _BudgetExceeded as exc:
            raise ConfigError(
                f"too complex to load: {exc.message}",
                _mark_location(file, exc.mark),
                code=codes.E109,
                hint="deploy files are small; this looks generated or hostile",
            ) from None
        except RecursionError:
            raise ConfigError(
                "too complex to load: nesting or aliases recurse too deep", Location(file), code=codes.E109
            ) from None
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            message = " ".join(p for p in (exc.context, exc.problem) if p)
            raise ConfigError(
                f"YAML syntax error: {message or exc}", _mark_location(file, mark), code=codes.E101
            ) from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"YAML error: {exc}", Location(file), code=codes.E101) from None
    finally:
        loader.dispose()
    if not isinstance(tree, Map):
        kind = "a list" if isinstance(tree, Seq) else "a scalar"
        raise ConfigError(
            f"the top level of a deploy file must be a mapping, not {kind}",
            tree.origin.location,
            code=codes.E104,
        )
    return tree


def load_file(
    path: Path, env: dict[str, str] | None = None, text: str | bytes | None = None, *, named: bool = False
) -> Map:
    """Read, parse and interpolate one deploy file (OmegaConf resolves `${...}` per file).

    `text` is the file's content when it does not come from disk (stdin, as bytes or text); `path`
    then only names it, and it gets the same size cap and strict decoding as a file. From disk,
    only through the guarded reader (regular files, size cap, strict UTF-8); `named`: the user
    named this file as the argument itself, so a pipe there (`<(git show ...)`) is read too.
    """
    name = display_path(path)
    text = read_text(path, name, named=named) if text is None else _checked(text, name)
    return resolve_interpolations(parse_text(text, name), dict(os.environ) if env is None else env)


def _checked(text: str | bytes, name: str) -> str:
    """Content that did not come from a file, held to a file's rules (cap, strict UTF-8)."""
    size = len(text)
    if size > MAX_FILE_BYTES:
        raise ConfigError(
            f"cannot read {name}: it has more than {MAX_FILE_BYTES} bytes; the limit is {MAX_FILE_BYTES}",
            Location(name),
            code=codes.E109,
        )
    return decode_utf8(text, name) if isinstance(text, bytes) else text

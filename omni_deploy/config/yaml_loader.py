"""Load one YAML file into positioned nodes, reading scalars exactly as vllm-omni does.

vllm-omni loads deploy files with OmegaConf, whose loader is PyYAML's SafeLoader (YAML 1.1:
`on`/`off`/`yes`/`no` are booleans) plus two changes: `1e3` without a dot is a float, and
timestamps stay strings. OmegaConf refuses duplicate keys; we refuse them too and name both lines.
Only the standard tags are accepted, so a `!!python/...` tag is reported and never constructed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from omni_deploy import codes
from omni_deploy.config.interpolate import resolve_interpolations
from omni_deploy.config.nodes import Entry, Map, Node, Origin, Scalar, Seq
from omni_deploy.errors import ConfigError, Location

_FLOAT = re.compile(
    r"""^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9][0-9_]*(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
    re.X,
)

_STANDARD_TAGS = frozenset(
    "tag:yaml.org,2002:" + name
    for name in ("str", "int", "float", "bool", "null", "map", "seq", "merge", "timestamp")
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


class _Builder:
    def __init__(self, loader: OmegaConfLikeLoader, file: str) -> None:
        self.loader = loader
        self.file = file

    def origin(self, node: yaml.Node) -> Origin:
        mark = node.start_mark
        return Origin(self.file, mark.line + 1, mark.column + 1)

    def build(self, node: yaml.Node) -> Node:
        if node.tag not in _STANDARD_TAGS:
            kind = "Python object tag" if "python/" in node.tag else "tag"
            raise ConfigError(
                f"unsupported {kind} {node.tag!r}: deploy files allow plain YAML only",
                self.origin(node).location,
                code=codes.E103,
                hint="vllm-omni loads deploy files safely and would refuse this too",
            )
        if isinstance(node, yaml.MappingNode):
            return self.build_map(node)
        if isinstance(node, yaml.SequenceNode):
            return Seq([self.build(item) for item in node.value], self.origin(node))
        value = self.loader.construct_object(node, deep=True)
        return Scalar(value, self.origin(node))

    def build_map(self, node: yaml.MappingNode) -> Map:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                raise ConfigError(
                    "mapping keys must be plain scalars",
                    self.origin(key_node).location,
                    code=codes.E105,
                )
            key = self.loader.construct_object(key_node)
            if key in seen:
                first = seen[key].start_mark.line + 1
                raise ConfigError(
                    f"duplicate key {key!r} (first set on line {first}); YAML loaders keep only one of them",
                    self.origin(key_node).location,
                    code=codes.E102,
                    hint=f"remove one of the two, on line {first} or line {key_node.start_mark.line + 1}",
                )
            seen[key] = key_node
        # `<<` merge keys: PyYAML puts the merged pairs first so that own keys win.
        self.loader.flatten_mapping(node)
        entries: dict[Any, Entry] = {}
        for key_node, value_node in node.value:
            key = self.loader.construct_object(key_node)
            if isinstance(key, (list, dict)):
                raise ConfigError(
                    "mapping keys must be plain scalars",
                    self.origin(key_node).location,
                    code=codes.E105,
                )
            entries.pop(key, None)
            entries[key] = Entry(self.origin(key_node), self.build(value_node))
        return Map(entries, self.origin(node))


def parse_text(text: str, file: str) -> Map:
    """Parse YAML text into a positioned top-level mapping (an empty document is `{}`)."""
    loader = OmegaConfLikeLoader(text)
    try:
        try:
            root = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            message = " ".join(p for p in (exc.context, exc.problem) if p)
            raise ConfigError(
                f"YAML syntax error: {message or exc}", _mark_location(file, mark), code=codes.E101
            ) from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"YAML error: {exc}", Location(file), code=codes.E101) from None
        if root is None:
            return Map({}, Origin(file, 1, 1))
        builder = _Builder(loader, file)
        try:
            tree = builder.build(root)
        except yaml.MarkedYAMLError as exc:
            raise ConfigError(
                f"YAML error: {exc.problem or exc}",
                _mark_location(file, exc.problem_mark),
                code=codes.E101,
            ) from None
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


def load_file(path: Path, env: dict[str, str] | None = None, text: str | None = None) -> Map:
    """Read, parse and interpolate one deploy file (OmegaConf resolves `${...}` per file).

    `text` is the file's content when it does not come from disk (stdin); `path` then only names it.
    """
    name = display_path(path)
    if text is not None:
        return resolve_interpolations(parse_text(text, name), dict(os.environ) if env is None else env)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"no such file: {name}", Location(name), code=codes.E107) from None
    except IsADirectoryError:
        raise ConfigError(f"is a directory, not a file: {name}", Location(name), code=codes.E107) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {name}: {exc}", Location(name), code=codes.E107) from None
    tree = parse_text(text, name)
    return resolve_interpolations(tree, dict(os.environ) if env is None else env)

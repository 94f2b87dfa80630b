"""The JSON Schema keywords the generated deploy schema uses, evaluated without jsonschema.

The schema (knowledge/schema.py, published as schemas/deploy.schema.json for editors) uses a
handful of 2020-12 keywords; importing jsonschema for them cost validate about a fifth of its
start-up. This evaluator yields the same errors as jsonschema's Draft202012Validator (with one
extension: NaN and infinity are not numbers of any field) for those keywords, and refuses a
schema with any other: tests/validate/test_schema_eval.py compares the two on every data file
and on generated documents, so they cannot drift apart unnoticed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

# Keywords that only describe: no error ever comes from them.
ANNOTATIONS = frozenset(
    {"$schema", "$id", "$defs", "$comment", "title", "description", "default", "x-expected"}
)
ASSERTIONS = frozenset(
    {
        "$ref", "type", "properties", "additionalProperties", "propertyNames", "items", "required",
        "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "enum", "pattern",
    }
)  # fmt: skip


class UnsupportedSchema(ValueError):
    """The schema uses a keyword this evaluator does not know (extend it, and its test)."""


@dataclass
class SchemaError:
    """What schema_check reads of a jsonschema ValidationError, under the same names."""

    validator: str
    validator_value: Any
    instance: Any
    schema: dict[str, Any]
    absolute_path: list[Any] = field(default_factory=list)
    schema_path: list[Any] = field(default_factory=list)
    message: str = ""


def not_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _is_type(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return kind == "number" or isinstance(value, int) or value.is_integer()


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, and containers compare item by item."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def check_supported(schema: Any) -> None:
    """Raise UnsupportedSchema for a keyword outside ANNOTATIONS and ASSERTIONS, anywhere."""
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        unknown = set(node) - ANNOTATIONS - ASSERTIONS
        if unknown:
            raise UnsupportedSchema(f"schema keywords not evaluated here: {', '.join(sorted(unknown))}")
        stack += list(node.get("properties", {}).values()) + list(node.get("$defs", {}).values())
        stack += [
            node[k]
            for k in ("additionalProperties", "propertyNames", "items")
            if isinstance(node.get(k), dict)
        ]


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


class Evaluator:
    def __init__(self, schema: dict[str, Any], root: dict[str, Any] | None = None) -> None:
        check_supported(schema)
        self.schema = schema
        self.root = root if root is not None else schema

    def iter_errors(self, instance: Any) -> Iterator[SchemaError]:
        yield from self._descend(instance, self.schema, [], [])

    def _resolve(self, ref: str) -> dict[str, Any]:
        if not ref.startswith("#/"):
            raise UnsupportedSchema(f"only local references are evaluated here, not {ref!r}")
        node: Any = self.root
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return dict(node)

    def _descend(self, value: Any, schema: Any, path: list[Any], spath: list[Any]) -> Iterator[SchemaError]:
        if not isinstance(schema, dict):
            return  # `true` (and the `false` of additionalProperties, handled there)
        for keyword, wanted in schema.items():
            if keyword == "$ref":  # not a step of the schema path (as jsonschema counts it)
                yield from self._descend(value, self._resolve(wanted), path, spath)
            elif keyword not in ANNOTATIONS:
                yield from self._keyword(keyword, wanted, value, schema, path, [*spath, keyword])

    def _keyword(
        self, keyword: str, wanted: Any, value: Any, schema: dict[str, Any], path: list[Any], here: list[Any]
    ) -> Iterator[SchemaError]:
        step = _Step(keyword, wanted, value, schema, path, here)
        yield from getattr(self, _METHODS[keyword])(step)

    def _type(self, at: _Step) -> Iterator[SchemaError]:
        kinds = at.wanted if isinstance(at.wanted, list) else [at.wanted]
        if not_finite(at.value) and ("number" in kinds or "integer" in kinds):
            yield at.error(f"{at.value!r} is not a finite number")
        elif not any(_is_type(at.value, k) for k in kinds):
            yield at.error(f"{at.value!r} is not of type {', '.join(map(repr, kinds))}")

    def _bound(self, at: _Step) -> Iterator[SchemaError]:
        if _is_type(at.value, "number") and _out_of_bound(at.keyword, at.value, at.wanted):
            yield at.error(f"{at.value!r} is out of bounds ({at.keyword} {at.wanted!r})")

    def _enum(self, at: _Step) -> Iterator[SchemaError]:
        if not any(_equal(at.value, option) for option in at.wanted):
            yield at.error(f"{at.value!r} is not one of {at.wanted!r}")

    def _pattern(self, at: _Step) -> Iterator[SchemaError]:
        if isinstance(at.value, str) and not _regex(at.wanted).search(at.value):
            yield at.error(f"{at.value!r} does not match {at.wanted!r}")

    def _required(self, at: _Step) -> Iterator[SchemaError]:
        missing = [n for n in at.wanted if n not in at.value] if isinstance(at.value, dict) else []
        yield from (at.error(f"{name!r} is a required property") for name in missing)

    def _items(self, at: _Step) -> Iterator[SchemaError]:
        for index, item in enumerate(at.value if isinstance(at.value, list) else []):
            yield from self._descend(item, at.wanted, [*at.path, index], at.here)

    def _properties(self, at: _Step) -> Iterator[SchemaError]:
        if not isinstance(at.value, dict):
            return
        for name, sub in at.wanted.items():
            if name in at.value:
                yield from self._descend(at.value[name], sub, [*at.path, name], [*at.here, name])

    def _additional(self, at: _Step) -> Iterator[SchemaError]:
        if not isinstance(at.value, dict):
            return
        extra = [k for k in at.value if k not in at.schema.get("properties", {})]
        if at.wanted is False and extra:
            listed = ", ".join(repr(k) for k in sorted(extra, key=str))
            yield at.error(f"Additional properties are not allowed ({listed} were unexpected)")
        elif isinstance(at.wanted, dict):
            for name in extra:
                yield from self._descend(at.value[name], at.wanted, [*at.path, name], at.here)

    def _property_names(self, at: _Step) -> Iterator[SchemaError]:
        for name in at.value if isinstance(at.value, dict) else []:
            yield from self._descend(name, at.wanted, list(at.path), at.here)


@dataclass(frozen=True)
class _Step:
    """One keyword of one schema applied to one value, and where (instance path, schema path)."""

    keyword: str
    wanted: Any
    value: Any
    schema: dict[str, Any]
    path: list[Any]
    here: list[Any]

    def error(self, message: str) -> SchemaError:
        return SchemaError(
            self.keyword, self.wanted, self.value, self.schema, list(self.path), list(self.here), message
        )


# Each assertion keyword (but $ref, which _descend follows) and the Evaluator method that applies it.
_METHODS = {
    "type": "_type",
    "minimum": "_bound",
    "exclusiveMinimum": "_bound",
    "maximum": "_bound",
    "exclusiveMaximum": "_bound",
    "enum": "_enum",
    "pattern": "_pattern",
    "required": "_required",
    "items": "_items",
    "properties": "_properties",
    "additionalProperties": "_additional",
    "propertyNames": "_property_names",
}
assert set(_METHODS) | {"$ref"} == ASSERTIONS


def _out_of_bound(keyword: str, value: float, bound: float) -> bool:
    if keyword == "minimum":
        return bool(value < bound)
    if keyword == "exclusiveMinimum":
        return bool(value <= bound)
    if keyword == "maximum":
        return bool(value > bound)
    return bool(value >= bound)

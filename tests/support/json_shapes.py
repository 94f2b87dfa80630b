"""Check a command's JSON against the shape written down in schemas/output/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas" / "output"


def _registry() -> Registry:
    resources = [
        (path.name, Resource.from_contents(json.loads(path.read_text()))) for path in SCHEMAS.glob("*.json")
    ]
    return Registry().with_resources(resources)


def assert_shape(document: Any, schema_name: str) -> None:
    schema = json.loads((SCHEMAS / f"{schema_name}.schema.json").read_text())
    validator = Draft202012Validator(
        schema, registry=_registry(), format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])

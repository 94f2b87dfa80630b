"""Check a command's JSON against the shape written down in schemas/output/.

Each schema file is used alone, with no registry of the others: that is how a user's validator
meets it (each file embeds the pieces it refers to; tools/schema_bundle.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas" / "output"


def assert_shape(document: Any, schema_name: str) -> None:
    schema = json.loads((SCHEMAS / f"{schema_name}.schema.json").read_text())
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])

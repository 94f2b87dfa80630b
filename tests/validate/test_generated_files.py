"""The committed schema and key reference are generated from the knowledge table and must match it."""

from __future__ import annotations

import json
from pathlib import Path

from omni_deploy.knowledge.keys import ALL
from omni_deploy.knowledge.reference_doc import reference_markdown
from omni_deploy.knowledge.schema import build_schema, schema_text

ROOT = Path(__file__).resolve().parents[2]


def test_schema_file_is_up_to_date() -> None:
    committed = (ROOT / "schemas" / "deploy.schema.json").read_text()
    assert committed == schema_text(), "run: omni-deploy schema > schemas/deploy.schema.json"


def test_reference_doc_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "deploy-reference.md").read_text()
    assert committed == reference_markdown(), "run: omni-deploy schema --reference > docs/deploy-reference.md"


def test_schema_is_valid_2020_12() -> None:
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(build_schema())
    assert json.loads(schema_text())["$schema"].endswith("2020-12/schema")


def test_every_key_is_documented_and_typed_in_the_schema() -> None:
    doc = reference_markdown()
    schema = build_schema()
    for key in ALL:
        assert f"`{key.name}`" in doc, key.name
        if key.place == "code2wav":
            assert key.name in schema["$defs"]["minicpmoCode2wavExtra"]["properties"]
        if key.place == "stage" and not key.error_if_present:
            assert key.name in schema["$defs"]["stage"]["properties"]

"""The output schemas stand alone: absolute ids, the shared pieces copied in, usable from anywhere."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from tests.support.cli import run_cli
from tools.schema_bundle import SCHEMA_BASE, stale

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas" / "output"


def test_committed_schemas_are_current() -> None:
    assert stale() == [], "regenerate: python -m tools.schema_bundle"


@pytest.mark.parametrize("path", sorted(SCHEMAS.glob("*.schema.json")), ids=lambda p: p.name)
def test_every_schema_has_an_absolute_id_and_every_ref_resolves_inside(path: Path) -> None:
    schema = json.loads(path.read_text())
    assert schema["$id"] == SCHEMA_BASE + path.name
    Draft202012Validator.check_schema(schema)
    # Every reference resolves from this file alone: a registry of it and nothing else. (All ids
    # share one folder, so a reference means the same from the file or from an embedded piece.)
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    resource = DRAFT202012.create_resource(schema)
    resolver = Registry().with_resource(schema["$id"], resource).crawl().resolver(base_uri=schema["$id"])
    stack, refs = [schema], []
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            refs += [node["$ref"]] if isinstance(node.get("$ref"), str) else []
            stack += list(node.values())
        elif isinstance(node, list):
            stack += node
    for ref in refs:
        assert resolver.lookup(ref).contents is not None, ref


def test_a_copied_schema_validates_output_from_another_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone = tmp_path / "elsewhere" / "validate.schema.json"
    alone.parent.mkdir()
    shutil.copy(SCHEMAS / "validate.schema.json", alone)
    monkeypatch.chdir(tmp_path)
    bad = SCHEMAS.parents[1] / "tests" / "data" / "validate" / "negative" / "typos.yaml"
    document = json.loads(run_cli(capsys, "validate", str(bad), "-o", "json").out)
    validator = Draft202012Validator(json.loads(alone.read_text()))
    assert list(validator.iter_errors(document)) == []
    document["files"][0]["findings"][0]["severity"] = "fatal"  # the finding piece is checked too
    assert [e.validator for e in validator.iter_errors(document)] == ["enum"]

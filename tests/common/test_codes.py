"""The finding-code table: every code has an example that produces it, every example's codes are declared."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from omni_deploy.common.codes import CODES, ERROR, INFO, WARNING
from omni_deploy.validate.rule_pages import findings_markdown
from tests.support.examples import run_example

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
EXAMPLES = sorted(
    [*(DATA / "validate" / "negative").glob("*.yaml"), *(DATA / "loader" / "negative").glob("*.yaml")]
)


@pytest.mark.parametrize("code", sorted(CODES), ids=sorted(CODES))
def test_each_code_has_an_example_that_produces_it(code: str) -> None:
    example = CODES[code].example
    assert example, f"{code} has no example file"
    report = run_example(DATA / example)
    produced = {f.code for f in report.findings}
    assert code in produced, f"{example} produces {sorted(produced)}, not {code}"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_produce_declared_codes_only(path: Path) -> None:
    undeclared = [f.text() for f in run_example(path).findings if f.code not in CODES]
    assert not undeclared, "declare these codes in omni_deploy/common/codes.py:\n" + "\n".join(undeclared)


def test_severity_letter_matches_the_table() -> None:
    letters = {ERROR: "E", WARNING: "W", INFO: "I"}
    for code in CODES.values():
        assert code.id[0] == letters[code.severity], code


def test_every_code_literal_in_the_package_is_declared() -> None:
    # Codes written as strings (ConfigError(..., code="E101") in the loader) must be in the table too.
    literal = re.compile(r"""["']([EWI]\d{3})["']""")
    for source in (ROOT / "omni_deploy").rglob("*.py"):
        for match in literal.finditer(source.read_text(encoding="utf-8")):
            assert match.group(1) in CODES, f"{source.relative_to(ROOT)}: {match.group(1)} is not declared"


def test_findings_page_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "findings.md").read_text()
    assert committed == findings_markdown(), "run: omni-deploy schema --findings > docs/findings.md"


def test_an_undeclared_code_fails_where_it_is_raised() -> None:
    from omni_deploy.common.errors import ConfigError

    with pytest.raises(KeyError):
        ConfigError("x", code="E999")

"""validate's SARIF, GitHub and JUnit reporters through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.support.cli import run_cli
from tests.support.json_shapes import assert_shape

ROOT = Path(__file__).resolve().parents[2]
NEG = ROOT / "tests" / "data" / "validate" / "negative"
TYPES = NEG / "type_errors.yaml"
UNKNOWN = NEG / "unknown_stage_key.yaml"


@pytest.fixture(autouse=True)
def _in_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # SARIF and GitHub name files relative to the checkout


def test_sarif_has_one_rule_per_code_and_results_at_line_and_column(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = run_cli(
        capsys, "validate", str(TYPES), str(UNKNOWN), "-o", "sarif", "--target-version", "0.30.0"
    )
    assert result.code == 1
    data = json.loads(result.out)
    assert_shape(data, "sarif-subset")
    run = data["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rules == sorted(set(rules)) and {"E201", "W302"} <= set(rules)
    first = run["results"][0]
    assert rules[first["ruleIndex"]] == first["ruleId"] == "E201"
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "tests/data/validate/negative/type_errors.yaml"
    assert location["region"] == {"startLine": 6, "startColumn": 19}
    assert {r["level"] for r in run["results"]} == {"error", "warning"}


def test_sarif_file_level_finding_has_no_region(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    result = run_cli(capsys, "validate", str(tmp_path / "missing.yaml"), "-o", "sarif")
    assert result.code == 1
    (found,) = json.loads(result.out)["runs"][0]["results"]
    assert found["ruleId"] == "E107" and "region" not in found["locations"][0]["physicalLocation"]


def test_github_workflow_commands(capsys: pytest.CaptureFixture[str]) -> None:
    # 0.28.0: a release that passes the unknown stage key on to vLLM (a warning); 0.30.0's typed
    # config refuses it (E315), which would make both files invalid.
    result = run_cli(
        capsys, "validate", str(TYPES), str(UNKNOWN), "-o", "github", "--target-version", "0.28.0"
    )
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[0].startswith(
        "::error file=tests/data/validate/negative/type_errors.yaml,line=6,col=19,title=E201 "
        "$.stages[?@.stage_id==0].max_num_seqs::"
    )
    assert any(
        line.startswith("::warning file=tests/data/validate/negative/unknown_stage_key.yaml,line=5,col=5,")
        for line in lines
    )
    assert lines[-1].startswith("invalid: 1 of 2 files;")


def test_github_escapes_newlines_and_separators(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    odd = tmp_path / "a,b:c.yaml"
    odd.write_text("stages: [\n")
    result = run_cli(capsys, "validate", str(odd), "-o", "github")
    first = result.out.splitlines()[0]
    assert "a%2Cb%3Ac.yaml" in first and first.startswith("::error file=")


def test_junit_one_case_per_file(capsys: pytest.CaptureFixture[str]) -> None:
    good = str(ROOT / "deploy" / "minicpmo_4_5_turn.yaml")
    result = run_cli(capsys, "validate", str(TYPES), good, "-o", "junit", "--target-version", "0.30.0")
    assert result.code == 1
    suite = ElementTree.fromstring(result.out.split("\n", 1)[1])
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    cases = suite.findall("testcase")
    assert cases[0].find("failure") is not None and "error[E201]" in (cases[0].find("failure").text or "")
    assert cases[1].find("failure") is None


SHARED = Path(__file__).resolve().parents[1] / "data" / "validate" / "shared_base"


@pytest.mark.parametrize("output", ["concise", "json"])
def test_a_base_files_finding_is_listed_once_for_several_overlays(
    capsys: pytest.CaptureFixture[str], output: str
) -> None:
    """Two overlays of one base: the base's W301 is in both reports, and listed once (as text does)."""
    result = run_cli(capsys, "validate", str(SHARED / "overlay_a.yaml"), str(SHARED / "overlay_b.yaml"),
                     "-o", output)  # fmt: skip
    assert result.code == 0
    if output == "concise":
        lines = [line for line in result.out.splitlines() if "[W301]" in line]
        assert len(lines) == 1 and "base.yaml:3:1" in lines[0], result.out
        assert "(W301 1)" in result.out
    else:
        files = json.loads(result.out)["files"]
        listed = [f["code"] for entry in files for f in entry["findings"]]
        assert listed == ["W301"] and [entry["valid"] for entry in files] == [True, True]

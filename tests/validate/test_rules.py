"""Checks own their codes: every code has one check that declares and documents it, the examples
in each page do what the page says, and the runner refuses a code a check did not declare."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from omni_deploy.common import codes
from omni_deploy.common.codes import CODES
from omni_deploy.validate import runner
from omni_deploy.validate.context import Context, Options
from omni_deploy.validate.findings import Finding, at
from omni_deploy.validate.rule_pages import pages
from omni_deploy.validate.rules import UndeclaredCode, emits, parse_sections
from tests.support.cli import run_cli
from tests.support.examples import run_example

ROOT = Path(__file__).resolve().parents[2]
PAGES = pages()
# Examples that cannot be a file here, shown but not run (each says why in its first line). The
# server check's need vllm-omni in the serving interpreter: the vllm tier runs that check, and
# tests/common/test_codes.py runs their data examples through the stand-in interpreter.
NOT_RUN = {
    ("E108", "fails"),
    ("E113", "fails"),
    ("E395", "fails"),
    ("E395", "passes"),
    ("E396", "fails"),
    ("E396", "passes"),
    ("E397", "fails"),
    ("W398", "fails"),
}


def _workspace(tmp_path: Path) -> Path:
    """What the examples refer to: the bundled profile, a model config, a vllm-omni main checkout."""
    shutil.copy(ROOT / "deploy" / "minicpmo_4_5_turn.yaml", tmp_path)
    shutil.copy(ROOT / "tests" / "data" / "validate" / "talker_config.json", tmp_path / "config.json")
    shutil.copytree(ROOT / "tests" / "data" / "knowledge" / "unreleased", tmp_path / "vllm-omni-main")
    return tmp_path


def _found(example: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
           monkeypatch: pytest.MonkeyPatch) -> set[tuple[str, str]]:  # fmt: skip
    """(code, severity) of what validate reports for the example."""
    where = _workspace(tmp_path)
    if example.startswith("$ omni-deploy "):
        monkeypatch.chdir(where)
        args = shlex.split(example[len("$ omni-deploy ") :], comments=True)
        result = run_cli(capsys, *args, "-o", "json")
        return {
            (f["code"], f["severity"]) for file in json.loads(result.out)["files"] for f in file["findings"]
        }
    path = where / "example.yaml"
    path.write_text(example)
    return {(f.code, f.severity) for f in run_example(path).findings}


CASES = [(code, kind) for code in sorted(PAGES) for kind in ("fails", "passes")]


@pytest.mark.parametrize(("code", "kind"), CASES, ids=[f"{c}-{k}" for c, k in CASES])
def test_each_example_does_what_its_page_says(code: str, kind: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    example = getattr(PAGES[code], kind)
    if (code, kind) in NOT_RUN:
        assert example.startswith("# shown, not run by the tests: "), f"{code} {kind}: say why it is not run"
        return
    assert not example.startswith("# shown, not run"), f"{code} {kind} is runnable: run it"
    found = _found(example, tmp_path, capsys, monkeypatch)
    codes_found = {code for code, _ in found}
    if kind == "fails":
        assert code in codes_found, f"{code}'s failing example reports {sorted(found)}"
    else:
        assert code not in codes_found, f"{code}'s passing example reports it"
        assert all(severity != "error" for _, severity in found), f"{code}'s passing example: {found}"


def test_every_code_has_one_owning_check() -> None:
    assert set(PAGES) == set(CODES)


def test_every_code_has_its_own_number() -> None:
    numbers = [code[1:] for code in CODES]
    assert len(numbers) == len(set(numbers)), sorted(n for n in numbers if numbers.count(n) > 1)


def test_the_runner_refuses_a_code_a_check_does_not_declare(monkeypatch: pytest.MonkeyPatch) -> None:
    @emits(codes.W351)
    def check_sloppy(ctx: Context) -> list[Finding]:
        return [at(None, ctx.file, codes.E350, "$", "not mine to report")]

    monkeypatch.setattr(runner, "CHECKS", [check_sloppy])
    with pytest.raises(UndeclaredCode, match="check_sloppy reported E350"):
        runner.validate_file(str(ROOT / "deploy" / "minicpmo_4_5_turn.yaml"), Options())


def test_a_page_must_say_every_field() -> None:
    sections = parse_sections("Summary.\n\nW351:\n    What it does: adds up.\n    Why: it fails.\n", "x")
    assert sections == {"W351": {"What it does": "adds up.", "Why": "it fails."}}
    with pytest.raises(ValueError, match="unexpected line"):
        parse_sections("W351:\nnot a field\n", "x")


def test_rule_prints_the_page(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "rule", "E350")
    assert result.code == 0
    for heading in ("# E350\n", "## What it does", "## Why", "## Fails", "## Passes", "check_gpu_memory"):
        assert heading in result.out
    assert "gpu_memory_utilization: 0.5" in result.out
    assert run_cli(capsys, "rule", "e350").out == result.out


def test_rule_all_is_the_findings_page(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "rule", "--all").out == (ROOT / "docs" / "findings.md").read_text()
    assert run_cli(capsys, "rule").code == 2


def test_an_unknown_code_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "rule", "E351")
    assert result.code == 2 and "unknown finding code 'E351'" in result.err and "W351" in result.err
    assert "Traceback" not in result.err and result.out == ""

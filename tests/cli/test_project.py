"""The project: its root and settings file, and the deploy files that are its own (no FILE given)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from omni_deploy.cli import project
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
NEG = ROOT / "tests" / "data" / "validate" / "negative"
BASE = (ROOT / "tests" / "data" / "validate" / "base_minicpmo.yaml").resolve()
TYPO = f"base_config: {BASE}\nstages:\n  - stage_id: 1\n    max_num_seq: 8\n"
CLEAN = f"base_config: {BASE}\n"
WORKFLOW = "name: ci\non: [push]\njobs: {}\n"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with deploy/ holding a deploy file with a typo and a workflow that is no deploy file."""
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "mine.yaml").write_text(TYPO)
    (tmp_path / "deploy" / "ci.yaml").write_text(WORKFLOW)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_validate_without_file_checks_the_projects_deploy_files(
    capsys: pytest.CaptureFixture[str], repo: Path
) -> None:
    # The operator's case: deploy/mine.yaml has an error; before, a bare `validate` printed "ok".
    result = run_cli(capsys, "validate", "--target-version", "0.30.0")
    assert result.code == 1
    assert result.out.splitlines()[0] == "deploy/mine.yaml: 2 errors"  # E307, and E315 at 0.30.0
    assert result.out.splitlines()[-2].startswith("invalid: 1 of 1 file;")  # the workflow is skipped
    assert "bundled" not in result.err


def test_files_and_exclude_from_the_settings(capsys: pytest.CaptureFixture[str], repo: Path) -> None:
    (repo / "configs" / "old").mkdir(parents=True)
    (repo / "configs" / "a.yaml").write_text(CLEAN)
    (repo / "configs" / "old" / "b.yaml").write_text(TYPO)
    (repo / ".omni-deploy.yaml").write_text('files: ["configs/**/*.yaml"]\nexclude: ["configs/old"]\n')
    inner = repo / "deploy"
    assert project.find(inner).root == repo  # found from below the root, too
    result = run_cli(capsys, "validate", "--target-version", "0.30.0", "-o", "json")
    import json

    assert [f["file"] for f in json.loads(result.out)["files"]] == ["configs/a.yaml"]
    assert result.code == 0
    # exclude also holds for what a directory argument finds, never for a file named outright
    folder = run_cli(capsys, "validate", "configs", "--target-version", "0.30.0", "-o", "json")
    assert [f["file"] for f in json.loads(folder.out)["files"]] == ["configs/a.yaml"]
    named = run_cli(capsys, "validate", "configs/old/b.yaml", "--target-version", "0.30.0")
    assert named.code == 1


def test_files_that_match_nothing_is_a_usage_error(capsys: pytest.CaptureFixture[str], repo: Path) -> None:
    (repo / ".omni-deploy.yaml").write_text('files: ["nowhere/*.yaml"]\n')
    result = run_cli(capsys, "validate")
    assert result.code == 2 and "no deploy file matches `files` of .omni-deploy.yaml" in result.err


def test_no_deploy_files_falls_back_to_the_bundled_profile_and_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli(capsys, "validate", "--target-version", "0.30.0")
    assert result.code == 0 and "minicpmo_4_5_turn.yaml" in result.err
    assert "no deploy files in deploy/ and no FILE given; using the bundled" in result.err


def test_commands_of_one_deployment_take_the_projects_only_file(
    capsys: pytest.CaptureFixture[str], repo: Path
) -> None:
    (repo / "deploy" / "mine.yaml").write_text(CLEAN)
    render = run_cli(capsys, "render")
    assert render.code == 0 and "deploy/mine.yaml" in render.out.splitlines()[0]
    explain = run_cli(capsys, "explain", "--backend", "--platform", "cuda", "-o", "json")
    assert explain.code == 0 and '"file": "deploy/mine.yaml"' in explain.out
    (repo / "deploy" / "other.yaml").write_text(CLEAN)
    for args in (
        ["render"],
        ["explain"],
        ["serve", "--dry-run"],
        ["k8s", "--model", "openbmb/MiniCPM-o-4_5"],
    ):
        result = run_cli(capsys, *args)
        assert result.code == 2, args
        assert (
            "the project holds 2 deploy files (deploy/mine.yaml, deploy/other.yaml); name one" in result.err
        )


@pytest.mark.parametrize(
    ("pattern", "path", "excluded"),
    [
        ("deploy/old", "deploy/old/a.yaml", True),
        ("deploy/old/*", "deploy/old/a.yaml", True),
        ("deploy/old/*", "deploy/old/x/a.yaml", True),  # its folder x matches
        ("**/draft-*.yaml", "deploy/x/draft-1.yaml", True),
        ("**/draft-*.yaml", "draft-1.yaml", True),
        ("*.yaml", "deploy/a.yaml", False),  # `*` stays inside one folder
        ("deploy/a?.yaml", "deploy/ab.yaml", True),
        ("deploy/[!a]*.yaml", "deploy/ab.yaml", False),
    ],
)
def test_exclude_patterns(tmp_path: Path, pattern: str, path: str, excluded: bool) -> None:
    found = project.Project(tmp_path, exclude=(pattern,))
    assert found.excluded(tmp_path / path) is excluded
    assert not found.excluded(Path("/elsewhere") / path)  # outside the project


@pytest.mark.parametrize(
    "text",
    ['files: "/abs/*.yaml"\n', 'files: ["../up/*.yaml"]\n', "files: []\n", "exclude: [3]\n", "filez: [a]\n"],
)
def test_bad_file_settings_are_errors(tmp_path: Path, text: str) -> None:
    (tmp_path / ".omni-deploy.yaml").write_text(text)
    with pytest.raises(project.ProjectSettingsError):
        project.find(tmp_path)


def test_pyproject_table_gives_files_too(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.omni-deploy]\nfiles = ["d/*.yaml"]\n')
    (tmp_path / "d").mkdir()
    shutil.copy(ROOT / "deploy" / "minicpmo_4_5_turn.yaml", tmp_path / "d" / "x.yaml")
    found = project.find(tmp_path)
    assert found.source == tmp_path / "pyproject.toml"
    assert [p.name for p in found.deploy_files()] == ["x.yaml"]


@pytest.mark.parametrize(
    "table",
    ['[tool.omni-deploy]\nstrict = true\n', '[tool."omni-deploy"]\nstrict = true\n',
     "tool.omni-deploy.strict = true\n", '[tool]\nomni-deploy = {strict = true}\n'],
)  # fmt: skip
def test_every_spelling_of_the_pyproject_table_is_read(tmp_path: Path, table: str) -> None:
    # A pyproject.toml without the table is not parsed at all (start-up); none of these is missed.
    (tmp_path / "pyproject.toml").write_text(
        table + '[project]\nname = "x"\ndependencies = ["omni-deploy"]\n'
    )
    assert project.find(tmp_path).strict is True

"""FILE arguments: stdin, directories, globs."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from omni_deploy.cli.file_args import STDIN_NAME, Input, InputError, expand

DEPLOY = "stages:\n  - stage_id: 0\n"
WORKFLOW = "name: ci\non: push\njobs: {}\n"
MANIFEST = "apiVersion: v1\nkind: Service\n---\napiVersion: v1\nkind: Pod\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "sub").mkdir()
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "b.yaml").write_text(DEPLOY)
    (tmp_path / "a.yml").write_text(DEPLOY)
    (tmp_path / "sub" / "c.yaml").write_text(DEPLOY)
    (tmp_path / ".hidden" / "d.yaml").write_text(DEPLOY)
    (tmp_path / "ci.yaml").write_text(WORKFLOW)
    (tmp_path / "k8s.yaml").write_text(MANIFEST)
    (tmp_path / "notes.txt").write_text(DEPLOY)
    return tmp_path


def test_directory_expands_to_its_deploy_files_sorted(tree: Path) -> None:
    names = [Path(i.name).relative_to(tree).as_posix() for i in expand([str(tree)], io.StringIO())]
    assert names == ["a.yml", "b.yaml", "sub/c.yaml"]


def test_glob_expands_and_skips_other_yaml(tree: Path) -> None:
    names = [Path(i.name).name for i in expand([str(tree / "*.y*ml")], io.StringIO())]
    assert names == ["a.yml", "b.yaml"]
    with pytest.raises(InputError, match="no deploy files match"):
        expand([str(tree / "*.json")], io.StringIO())


def test_named_file_is_kept_even_when_it_is_not_a_deploy_file(tree: Path) -> None:
    assert expand([str(tree / "ci.yaml")], io.StringIO()) == [Input(str(tree / "ci.yaml"))]


def test_stdin_once_with_a_name(tree: Path) -> None:
    assert expand(["-"], io.StringIO(DEPLOY)) == [Input(STDIN_NAME, DEPLOY)]
    assert expand(["-"], io.StringIO(DEPLOY), "deploy/x.yaml") == [Input("deploy/x.yaml", DEPLOY)]
    with pytest.raises(InputError, match="once"):
        expand(["-", "-"], io.StringIO(DEPLOY))


def test_empty_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no deploy files"):
        expand([str(tmp_path)], io.StringIO())

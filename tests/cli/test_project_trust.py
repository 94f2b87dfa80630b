"""A settings file is used only when it is a regular file of the user's or root's that no one else
may write, the link and its target alike; anything else is passed over and said (project.find)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from omni_deploy.cli.project import PROJECT_FILE, ProjectSettingsError, find


def test_a_fifo_or_a_folder_under_the_settings_name_is_passed_over(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / PROJECT_FILE)
    (tmp_path / "pyproject.toml").mkdir()
    found = find(tmp_path)
    assert found.source is None
    assert any("FIFO" in p for p in found.passed_over) and any("a directory" in p for p in found.passed_over)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (to plant a link another user owns)")
def test_a_link_another_user_planted_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "trusted.yaml"
    target.write_text("ignore: [W302]\n")
    link = tmp_path / PROJECT_FILE
    link.symlink_to(target)
    os.lchown(link, 4242, 4242)
    found = find(tmp_path)
    assert found.ignore == frozenset() and any("the link belongs to uid 4242" in p for p in found.passed_over)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('exclude: ["deploy/[9-0].yaml"]\n', "reversed"),
        ('files: ["deploy/[ab"]\n', "never closed"),
    ],
)
def test_malformed_patterns_are_settings_errors(tmp_path: Path, text: str, said: str) -> None:
    (tmp_path / PROJECT_FILE).write_text(text)
    with pytest.raises(ProjectSettingsError, match=said):
        find(tmp_path)


@pytest.mark.parametrize("text", ["tool = 5\nomni-deploy.x = 1\n", "[[tool]]\nomni-deploy = 1\n"])
def test_a_tool_key_that_is_not_a_table_is_a_settings_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(ProjectSettingsError, match="must be a table"):
        find(tmp_path)

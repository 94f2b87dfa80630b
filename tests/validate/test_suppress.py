"""Silencing findings: a comment on the line (or alone above it), --ignore codes, project settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_deploy.cli import project
from omni_deploy.validate.context import Options
from omni_deploy.validate.runner import validate_file

BASE = (Path(__file__).resolve().parents[1] / "data" / "validate" / "base_minicpmo.yaml").resolve()


def _codes(path: Path, ignore: frozenset[str] = frozenset()) -> list[tuple[str, int]]:
    report = validate_file(str(path), Options(target_version="0.30.0", ignore=ignore))
    return [(f.code, f.line) for f in report.findings if f.severity != "info"]


def test_comment_on_the_line_or_alone_above_it(tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(
        f"base_config: {BASE}\n"
        "connectors:\n"
        "  shm:\n"
        "    extra:\n"
        "      micro_batch_size: 4  # omni-deploy: ignore[W310] kept for the seed's server\n"
        "      # omni-deploy: ignore[W310, W303]\n"
        "      cfm_graph_precapture: true\n"
        "      enable_whole_euler: true  # omni-deploy: ignore[W303] (another code: stays)\n"
    )
    assert _codes(path) == [("W310", 8)]


def test_ignore_option_drops_codes_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(f"base_config: {BASE}\nnotes: hi\nstages:\n  - stage_id: 1\n    my_knob: 1\n")
    # 0.30.0's typed config also refuses the unknown stage key (E315, config/omni_config.py:1324).
    assert _codes(path) == [("W301", 2), ("E315", 5), ("W302", 5)]
    assert _codes(path, ignore=frozenset({"W301"})) == [("E315", 5), ("W302", 5)]
    assert _codes(path, ignore=frozenset({"W301", "E315"})) == [("W302", 5)]


def test_project_settings_yaml_wins_over_a_pyproject_above(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.omni-deploy]\nignore = "W351, W340"\ntarget-version = "0.28.0"\n'
    )
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    found = project.find(inner)
    assert found.ignore == {"W351", "W340"} and found.target_version == "0.28.0" and found.strict is None
    (tmp_path / "a" / ".omni-deploy.yaml").write_text("strict: true\n")
    nearer = project.find(inner)
    assert nearer.strict is True and nearer.ignore == frozenset()
    assert nearer.source == tmp_path / "a" / ".omni-deploy.yaml"


def test_pyproject_without_the_table_is_passed_over(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.other]\nx = 1\n")
    assert (
        project.find(tmp_path).source is None or project.find(tmp_path).source != tmp_path / "pyproject.toml"
    )


@pytest.mark.parametrize(
    "text", ["ignore: [W3]\n", "strict: yes please\n", "target-version: 0.3\n", "- a\n", "color: red\n"]
)
def test_bad_settings_are_errors(tmp_path: Path, text: str) -> None:
    (tmp_path / ".omni-deploy.yaml").write_text(text)
    with pytest.raises(project.ProjectSettingsError):
        project.find(tmp_path)


def test_parse_codes() -> None:
    assert project.parse_codes("w351, E350") == {"W351", "E350"}
    with pytest.raises(ValueError):
        project.parse_codes("W35")

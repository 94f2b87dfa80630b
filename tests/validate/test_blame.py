"""Findings land where the user can act: at the overlay's own value for sums, never inside an
installed package's file that was not named."""

from __future__ import annotations

from pathlib import Path

from omni_deploy.validate.context import Options
from omni_deploy.validate.runner import validate_file

BASE = (Path(__file__).resolve().parents[1] / "data" / "validate" / "base_minicpmo.yaml").read_text()


def _installed_base(tmp_path: Path, extra: str = "") -> Path:
    package = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "vllm_omni" / "deploy"
    package.mkdir(parents=True)
    (package / "base.yaml").write_text(BASE + extra)
    return package / "base.yaml"


def test_sum_points_at_the_overlays_value_and_names_the_others(tmp_path: Path) -> None:
    base = _installed_base(tmp_path)
    overlay = tmp_path / "mine.yaml"
    overlay.write_text(f"base_config: {base}\nstages:\n  - stage_id: 1\n    gpu_memory_utilization: 0.7\n")
    report = validate_file(str(overlay), Options(target_version="0.30.0"))
    (finding,) = [f for f in report.findings if f.code == "E350"]
    assert (finding.file, finding.line) == (str(overlay), 4)
    assert "stage 0 0.5 at base.yaml:" in finding.message and "stage 2 0.2 at base.yaml:" in finding.message


def test_nothing_points_into_an_installed_file_not_named(tmp_path: Path) -> None:
    base = _installed_base(tmp_path, "notes: from the package\n")
    overlay = tmp_path / "mine.yaml"
    overlay.write_text(f"base_config: {base}\n")
    report = validate_file(str(overlay), Options(target_version="0.30.0"))
    (finding,) = [f for f in report.findings if f.code == "W301"]
    assert finding.file == str(overlay) and (finding.line, finding.column) == (1, 1)  # its base_config: line
    assert f"(set in {base}:" in finding.message
    named = validate_file(str(base), Options(target_version="0.30.0"))
    assert [f.file for f in named.findings if f.code == "W301"] == [str(base)]


def test_a_base_files_suppressions_count_wherever_it_is_reached_from(tmp_path: Path) -> None:
    """An installed base's `# omni-deploy: ignore[W310]` silences its W310 for an overlay elsewhere
    too (before, the finding moved to the overlay first and lost the comment)."""
    silenced = BASE + "notes: from the package  # omni-deploy: ignore[W301]\n"
    base = _installed_base(tmp_path, "")
    base.write_text(silenced)
    overlay = tmp_path / "mine.yaml"
    overlay.write_text(f"base_config: {base}\n")
    report = validate_file(str(overlay), Options(target_version="0.30.0"))
    assert [f for f in report.findings if f.code == "W301"] == []
    unsilenced = BASE + "notes: from the package\n"
    base.write_text(unsilenced)
    report = validate_file(str(overlay), Options(target_version="0.30.0"))
    assert [(f.file, f.line, f.column) for f in report.findings if f.code == "W301"] == [(str(overlay), 1, 1)]

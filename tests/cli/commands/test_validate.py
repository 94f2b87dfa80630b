"""`omni-deploy validate` and `omni-deploy schema` through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.profiles import by_release

ROOT = Path(__file__).resolve().parents[3]
NEG = ROOT / "tests" / "data" / "validate" / "negative"


def test_text_output_points_at_file_line_col(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    # 0.28.0: a truly unknown stage key is passed on to vLLM, a warning only (0.30.0's typed config
    # refuses it: E315, config/omni_config.py:1324).
    args = ["validate", str(NEG / "unknown_stage_key.yaml"), "--target-version", "0.28.0"]
    result = run_cli(capsys, *args, "-o", "concise")
    assert result.code == 0
    first = result.out.splitlines()[0]
    # file:line:col of the file that set it; the path is in the merged config (stage 1 is its 2nd entry).
    assert first.startswith(
        "tests/data/validate/negative/unknown_stage_key.yaml:5:5: warning[W302] $.stages[?@.stage_id==1].my_custom_knob: "
    )
    assert result.out.splitlines()[-1] == "ok: 1 file; 0 errors, 1 warning, 0 infos (W302 1)"
    # The text for people: the file, the message first, then where (file:line:col and the path),
    # the line itself with a caret under the key, and the summary with counts by code.
    lines = run_cli(capsys, *args).out.splitlines()
    assert lines[0] == "tests/data/validate/negative/unknown_stage_key.yaml: 1 warning"
    assert lines[1].startswith("warning[W302]: 'my_custom_knob' is neither a vllm-omni stage field")
    assert (
        lines[2]
        == "  --> tests/data/validate/negative/unknown_stage_key.yaml:5:5 $.stages[?@.stage_id==1].my_custom_knob"
    )
    assert lines[3:6] == ["    |", "  5 |     my_custom_knob: 8", "    |     ^^^^^^^^^^^^^^"]
    assert lines[-1] == "ok: 1 file; 0 errors, 1 warning, 0 infos (W302 1)"


def test_typo_is_an_error_at_the_users_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    base = (NEG.parent / "base_minicpmo.yaml").resolve()
    path = tmp_path / "overlay.yaml"
    path.write_text(f"base_config: {base}\nstages:\n  - stage_id: 1\n    max_num_seq: 8\n")
    result = run_cli(capsys, "validate", str(path), "--target-version", "0.30.0", "-o", "concise")
    assert result.code == 1
    assert f"{path}:4:5: error[E307] $.stages[?@.stage_id==1].max_num_seq: " in result.out
    assert "(did you mean 'max_num_seqs'?)" in result.out
    framed = run_cli(capsys, "validate", str(path), "--target-version", "0.30.0").out
    assert "    ^^^^^^^^^^^ did you mean 'max_num_seqs'?" in framed
    assert "= fix: rename 'max_num_seq' to 'max_num_seqs' (with --fix)" in framed


def test_json_output_shape_and_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(NEG / "type_errors.yaml"), str(ROOT / "deploy" / "minicpmo_4_5_turn.yaml")]
    result = run_cli(capsys, "validate", *files, "-o", "json", "--target-version", "0.30.0")
    assert result.code == 1
    data = json.loads(result.out)
    assert [f["valid"] for f in data["files"]] == [False, True]
    finding = data["files"][0]["findings"][0]
    assert set(finding) == {"severity", "code", "file", "line", "column", "path", "message", "hint", "fix"}
    assert (finding["code"], finding["line"], finding["column"]) == ("E201", 6, 19)


def test_strict_fails_on_warnings_and_ignore_silences(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["validate", str(NEG / "memory_tight.yaml"), "--target-version", "0.30.0"]
    assert run_cli(capsys, *args).code == 0
    strict = run_cli(capsys, *args, "--strict")
    assert strict.code == 1 and "error[W351]" in strict.out
    assert run_cli(capsys, *args, "--strict", "--ignore", "W351,W340").code == 0
    assert run_cli(capsys, *args, "--ignore", "bogus").code == 2


@pytest.mark.parametrize(("path", "release"), by_release())
def test_bundled_deploy_files_pass_strict(
    capsys: pytest.CaptureFixture[str], path: Path, release: str
) -> None:
    """Each profile of deploy/ against the release its first line names."""
    result = run_cli(capsys, "validate", "--strict", "--target-version", release, str(path))
    assert result.code == 0, result.out


def test_project_settings_from_the_working_directory_upwards(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.omni-deploy]\nstrict = true\nignore = ["W340"]\n')
    inner = tmp_path / "configs" / "gpu"
    inner.mkdir(parents=True)
    monkeypatch.chdir(inner)
    path = str(NEG / "memory_tight.yaml")
    assert run_cli(capsys, "validate", path, "--target-version", "0.30.0").code == 1  # strict from the file
    assert run_cli(capsys, "validate", path, "--target-version", "0.30.0", "--no-strict").code == 0
    assert run_cli(capsys, "validate", path, "--target-version", "0.30.0", "--ignore", "W351").code == 0
    (inner / ".omni-deploy.yaml").write_text("strictt: true\n")
    bad = run_cli(capsys, "validate", path)
    # A settings file is part of how the command is asked (exit 2, like a bad option), with a hint.
    assert bad.code == 2 and "strictt" in bad.err and "did you mean 'strict'" in bad.err
    assert "Traceback" not in bad.err


def test_default_file_and_usage_errors(capsys: pytest.CaptureFixture[str], outside_project: Path) -> None:
    result = run_cli(capsys, "validate", "--target-version", "0.30.0")
    assert result.code == 0 and result.out.splitlines()[-1].startswith("ok: 1 file;")
    assert "no deploy files in deploy/ and no FILE given; using the bundled" in result.err
    assert run_cli(capsys, "validate", "--target-version", "banana").code == 2
    assert run_cli(capsys, "validate", "--platform", "tpu").code == 2


def test_missing_file_is_a_finding_not_a_crash(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    result = run_cli(capsys, "validate", str(tmp_path / "nope.yaml"))
    assert result.code == 1 and "error[E107]" in result.out and "Traceback" not in result.err


def test_gpu_memory_option(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(NEG / "kv_budget_too_big.yaml")
    assert run_cli(capsys, "validate", path).code == 0
    assert run_cli(capsys, "validate", path, "--gpu-memory-gib", "24").code == 1


def test_schema_command(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "schema")
    assert result.code == 0
    assert json.loads(result.out)["title"] == "vllm-omni deploy config"
    reference = run_cli(capsys, "schema", "--reference")
    assert reference.out.startswith("# Deploy key reference")


def test_pre_commit_hook_definition() -> None:
    import re

    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hooks[0]["id"] == "omni-deploy-validate"
    assert hooks[0]["entry"] == "omni-deploy validate --skip-non-deploy"
    files = re.compile(hooks[0]["files"])
    assert files.search("deploy/turn-bench.yaml") and files.search("ops/deploy/a/b.yml")
    assert not files.search(".github/workflows/ci.yaml") and not files.search("k8s/service.yaml")


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    from omni_deploy.cli.app import COMMANDS

    for name in COMMANDS:
        result = run_cli(capsys, name, "--help")
        assert result.code == 0 and "Usage:" in result.out, name
        assert len(result.out.splitlines()) > 3, name


def test_unreleased_source_tree_is_read_as_the_target(capsys: pytest.CaptureFixture[str]) -> None:
    tree = ROOT / "tests" / "data" / "knowledge" / "unreleased"
    path = str(NEG / "micro_batch_above_capacity.yaml")
    released = run_cli(capsys, "validate", path, "--target-version", "0.30.0")
    assert "W361" not in released.out and "warning[W310]" in released.out  # no release reads it
    newer = run_cli(capsys, "validate", path, "--target-version", "main", "--vllm-omni-source", str(tree))
    assert "warning[W361]" in newer.out and "W310" not in newer.out

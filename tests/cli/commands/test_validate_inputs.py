"""validate's FILE arguments: stdin, directories, globs, and the pre-commit hook's skipping."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest

from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
NEG = ROOT / "tests" / "data" / "validate" / "negative"
WORKFLOW = "name: ci\non: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n"
MANIFEST = "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\n"


def _stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(text))


def test_stdin_is_named_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _stdin(monkeypatch, "stages:\n  - stage_id: 0\n    max_num_seqs: eight\n")
    result = run_cli(capsys, "validate", "-", "-o", "json", "--target-version", "0.30.0")
    assert result.code == 1
    found = [(f["file"], f["code"], f["line"]) for f in json.loads(result.out)["files"][0]["findings"]]
    assert ("<stdin>", "E201", 3) in found


def test_stdin_filename_names_it_and_resolves_its_base(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # turn-bench.yaml names its base relative to itself: without a name that base is not found.
    _stdin(monkeypatch, (DEPLOY / "turn-bench.yaml").read_text())
    bare = run_cli(capsys, "validate", "-", "--target-version", "0.30.0", "-o", "concise")
    assert bare.code == 1 and bare.out.startswith("<stdin>:") and "E110" in bare.out
    _stdin(monkeypatch, (DEPLOY / "turn-bench.yaml").read_text())
    named = run_cli(capsys, "validate", "-", "--stdin-filename", str(DEPLOY / "turn-bench.yaml"),
                    "--target-version", "0.30.0", "-o", "concise")  # fmt: skip
    # Named: the base resolves (the Talker KV note comes from it), and the W310s that turn-bench.yaml
    # silences on its lines stay silenced (issue 13: the comments of the text read from stdin count).
    assert named.code == 0 and "turn-bench.yaml:47:32: info[I364]" in named.out and "W310" not in named.out
    text = re.sub(r"\s*# omni-deploy: ignore\[W310\].*", "", (DEPLOY / "turn-bench.yaml").read_text())
    _stdin(monkeypatch, text)
    unsilenced = run_cli(capsys, "validate", "-", "--stdin-filename", str(DEPLOY / "turn-bench.yaml"),
                         "--target-version", "0.30.0", "-o", "concise")  # fmt: skip
    assert unsilenced.code == 0 and "turn-bench.yaml:21:7: warning[W310]" in unsilenced.out


def test_directory_and_glob(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = tmp_path / "deploy"
    folder.mkdir()
    shutil.copy(NEG / "type_errors.yaml", folder / "bad.yaml")
    shutil.copy(DEPLOY / "minicpmo_4_5_turn.yaml", folder / "good.yml")
    (folder / "ci.yaml").write_text(WORKFLOW)  # found, not named: skipped silently
    result = run_cli(capsys, "validate", str(folder), "-o", "json", "--target-version", "0.30.0")
    assert result.code == 1
    assert [Path(f["file"]).name for f in json.loads(result.out)["files"]] == ["bad.yaml", "good.yml"]
    glob = run_cli(capsys, "validate", str(folder / "*.yml"), "--target-version", "0.30.0")
    assert glob.code == 0 and glob.out.splitlines()[-1].startswith("ok: 1 file;")
    empty = run_cli(capsys, "validate", str(tmp_path / "nothing-*.yaml"))
    assert empty.code == 2 and "no deploy files match" in empty.err


def test_hook_skips_other_yaml_without_findings(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    workflow, manifest = tmp_path / "ci.yaml", tmp_path / "k8s.yaml"
    workflow.write_text(WORKFLOW)
    manifest.write_text(MANIFEST)
    # Named outright, these are checked (and fail) ...
    assert run_cli(capsys, "validate", str(manifest)).code == 1
    # ... but the hook's flag skips them, and still checks a broken deploy file.
    hooked = run_cli(capsys, "validate", "--skip-non-deploy", str(workflow), str(manifest), "-o", "json")
    assert hooked.code == 0 and json.loads(hooked.out)["files"] == []
    broken = tmp_path / "broken.yaml"
    broken.write_text("stages: [\n")
    assert run_cli(capsys, "validate", "--skip-non-deploy", str(workflow), str(broken)).code == 1


def test_one_platform_vocabulary_any_case(capsys: pytest.CaptureFixture[str]) -> None:
    bench = str(DEPLOY / "turn-bench.yaml")
    assert run_cli(capsys, "validate", bench, "--platform", "CUDA", "--target-version", "main").code == 0
    wrong = run_cli(capsys, "validate", bench, "--platform", "none")
    assert wrong.code == 2 and "does not apply" in wrong.err


def test_pipeline_and_version_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    bench = str(DEPLOY / "turn-bench.yaml")
    pipeline = run_cli(capsys, "validate", bench, "--pipeline", "minicpmo")
    assert pipeline.code == 2 and "did you mean 'minicpmo_4_5'" in pipeline.err
    version = run_cli(capsys, "validate", bench, "--target-version", "0.30.0xyz")
    assert version.code == 2 and "not a version" in version.err


def test_json_shape_and_file_level_findings_have_no_position(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from tests.support.json_shapes import assert_shape

    files = [str(NEG / "type_errors.yaml"), str(tmp_path / "missing.yaml")]
    result = run_cli(capsys, "validate", *files, "-o", "json", "--target-version", "0.30.0")
    data = json.loads(result.out)
    assert_shape(data, "validate")
    missing = data["files"][1]["findings"][0]
    assert (missing["code"], missing["line"], missing["column"]) == ("E107", None, None)

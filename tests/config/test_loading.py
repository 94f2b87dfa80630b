"""Loading, chaining and merging deploy files: data-driven negative and positive cases."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from omni_deploy.common.errors import ConfigError
from omni_deploy.config.chain import locate_top_file, resolve_file
from omni_deploy.config.nodes import to_plain

DATA = Path(__file__).resolve().parents[1] / "data" / "loader"
NEGATIVE = sorted((DATA / "negative").glob("*.yaml"))
# First line of each negative file: `# expect: CODE [FILE:]LINE:COL` (FILE defaults to itself).
EXPECT = re.compile(r"^# expect: (E\d+) (?:(\S+):)?(\d+):(\d+)$")


def _expectation(path: Path) -> tuple[str, str, int, int]:
    match = EXPECT.match(path.read_text().splitlines()[0])
    assert match, f"{path.name} lacks its '# expect: CODE [FILE:]LINE:COL' header"
    return match.group(1), match.group(2) or path.name, int(match.group(3)), int(match.group(4))


@pytest.mark.parametrize("path", NEGATIVE, ids=[p.name for p in NEGATIVE])
def test_negative_files_fail_at_the_right_place(path: Path) -> None:
    code, file, line, column = _expectation(path)
    with pytest.raises(ConfigError) as caught:
        resolve_file(path)
    error = caught.value
    assert error.code == code, str(error)
    assert error.location is not None
    assert (error.location.line, error.location.column) == (line, column), str(error)
    assert error.location.file.endswith(file)


def test_python_tag_is_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    doc = tmp_path / "evil.yaml"
    doc.write_text(f'x: !!python/object/apply:os.system ["touch {marker}"]\n')
    with pytest.raises(ConfigError):
        resolve_file(doc)
    assert not marker.exists()


def test_duplicate_key_names_both_lines() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_file(DATA / "negative" / "duplicate_key.yaml")
    assert "line 4" in str(caught.value) and "line 6" in str(caught.value)


def test_cycle_prints_the_chain() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_file(DATA / "negative" / "cycle_a.yaml")
    assert "cycle_a.yaml -> " in str(caught.value)
    assert "cycle_b.yaml.inc -> " in str(caught.value)


def test_missing_base_names_the_path_tried() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_file(DATA / "negative" / "base_missing.yaml")
    assert "no_such_base.yaml" in caught.value.message
    assert "tried" in caught.value.message


def test_missing_base_points_at_a_bundled_file_of_that_name(tmp_path: Path) -> None:
    doc = tmp_path / "overlay.yaml"
    doc.write_text("base_config: minicpmo_4_5_turn.yaml\n")
    with pytest.raises(ConfigError) as caught:
        resolve_file(doc)
    assert caught.value.hint is not None
    assert "bundled file of that name" in caught.value.hint
    assert "deploy" in caught.value.hint


def test_scalars_read_as_omegaconf_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMNI_DEPLOY_TEST_UNSET_VAR", raising=False)
    config = to_plain(resolve_file(DATA / "positive" / "scalars.yaml").config)
    assert config["async_chunk"] is True
    assert config["trust_remote_code"] is True
    assert config["enable_prefix_caching"] is False
    assert config["stamp"] == "2026-11-30"
    assert config["ratio"] == 1000.0
    assert config["name"] == "minicpmo_4_5_profile"
    assert config["escaped"] == "${not_interpolated}"
    assert config["home"] == "fallback"
    assert config["stages"][0]["max_model_len"] == 4


def test_env_interpolation_reads_the_environment() -> None:
    config = resolve_file(DATA / "positive" / "scalars.yaml", env={"OMNI_DEPLOY_TEST_UNSET_VAR": "/x"}).config
    assert to_plain(config)["home"] == "/x"


def test_merge_keys_let_own_keys_win() -> None:
    config = to_plain(resolve_file(DATA / "positive" / "merge_key.yaml").config)
    assert config["stages"][0] == {"stage_id": 0, "max_num_seqs": 8, "enforce_eager": True}


def test_null_is_a_real_override() -> None:
    config = to_plain(resolve_file(DATA / "positive" / "null_override.yaml").config)
    assert "max_num_seqs" in config["stages"][0]
    assert config["stages"][0]["max_num_seqs"] is None
    assert config["stages"][0]["max_model_len"] == 4


def test_empty_file_is_an_empty_mapping() -> None:
    assert to_plain(resolve_file(DATA / "positive" / "empty.yaml").config) == {}


def test_bare_name_falls_back_to_the_project_deploy_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    found = locate_top_file("turn-bench.yaml")
    assert found.parent.name == "deploy" and found.name == "turn-bench.yaml"


def test_bare_name_that_exists_nowhere_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        locate_top_file("nowhere.yaml")
    assert caught.value.code == "E107"

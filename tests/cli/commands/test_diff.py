"""`omni-deploy diff` through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.json_shapes import assert_shape

ROOT = Path(__file__).resolve().parents[3]
TURN = str(ROOT / "deploy" / "minicpmo_4_5_turn.yaml")
BENCH = str(ROOT / "deploy" / "turn-bench.yaml")


def test_differing_files_exit_1_with_both_values_and_origins(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "diff", TURN, BENCH)
    assert result.code == 1
    lines = result.out.splitlines()
    at = lines.index("~ $.stages[?@.stage_id==1].max_num_seqs")
    assert lines[at + 1].startswith("    a: 4  (") and "minicpmo_4_5_turn.yaml:" in lines[at + 1]
    assert lines[at + 2].startswith("    b: 8  (") and "turn-bench.yaml:" in lines[at + 2]
    # The platform section of the overlay applies (default --platform cuda).
    assert "+ $.stages[?@.stage_id==0].kv_cache_memory_bytes" in lines
    assert lines[-1].endswith("0 removed")


def test_same_file_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "diff", BENCH, BENCH, "--platform", "ROCm")
    assert result.code == 0 and result.out.splitlines()[-1] == "identical"


def test_json_shape_and_platform_none(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "diff", TURN, BENCH, "--platform", "none", "-o", "json")
    assert result.code == 1
    data = json.loads(result.out)
    assert_shape(data, "diff")
    assert data["platform"] is None and not data["identical"]
    # Without a platform applied the overlay's cuda section is itself a difference.
    assert any(c["path"].startswith("$.platforms.cuda") for c in data["changes"])


def test_unloadable_file_exits_2_and_bad_platform_is_usage(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = run_cli(capsys, "diff", BENCH, str(tmp_path / "nope.yaml"))
    assert missing.code == 2 and "no such file" in missing.err and "Traceback" not in missing.err
    wrong = run_cli(capsys, "diff", BENCH, BENCH, "--platform", "cdua")
    assert wrong.code == 2 and "did you mean 'cuda'" in wrong.err

"""tools/speaker_decision_table.py: the table a behaviour-keeping change is held against."""

from __future__ import annotations

from pathlib import Path

from tools.speaker_decision_table import ENVS, HOSTS, OVERRIDES, PIPELINES, table

ROOT = Path(__file__).resolve().parents[2]


def test_one_file_gives_every_case_and_the_default_decides_cuda_torch() -> None:
    name = str(ROOT / "deploy" / "minicpmo_4_5_turn.yaml")
    found = table([name])
    assert len(found) == len(PIPELINES) * 6 * len(HOSTS) * len(ENVS) * len(OVERRIDES)
    assert "speaker_backend='cuda-torch'" in found[f"{name}|None|cuda|assumed|env0|None"]
    assert "speaker_backend='cpu-onnxruntime'" in found[f"{name}|None|rocm|assumed|env0|None"]


def test_a_file_that_does_not_load_is_a_row_not_a_crash(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.yaml")
    found = table([missing])
    assert set(found) == {f"{missing}|{p}" for p in PIPELINES}
    assert all(v.startswith("raises ConfigError") for v in found.values())

"""What a stage's process gets from the file: a value as its engine reads it, its env, its Ray placement."""

from __future__ import annotations

from pathlib import Path

from omni_deploy.config.nodes import DEFAULT_ORIGIN, Map, from_plain, to_plain
from omni_deploy.config.stage_process import ray_stages, stage_env, stage_value
from omni_deploy.deployment.model import Deployment

ROOT = Path(__file__).resolve().parents[2]


def test_stage_value_is_the_typed_field_else_the_engine_extra() -> None:
    stage = from_plain(
        {"max_num_seqs": 4, "devices": None, "engine_extras": {"max_num_seqs": 8, "max_model_len": 512}},
        DEFAULT_ORIGIN,
    )
    assert isinstance(stage, Map)
    assert to_plain(stage_value(stage, "max_num_seqs")) == 4  # the typed field wins
    assert to_plain(stage_value(stage, "max_model_len")) == 512  # else the engine extra
    assert to_plain(stage_value(stage, "devices")) is None  # written as null: the typed field still
    assert stage_value(stage, "enforce_eager") is None
    bare = from_plain({"engine_extras": None}, DEFAULT_ORIGIN)
    assert isinstance(bare, Map) and stage_value(bare, "x") is None


def _stages(plain: list[dict[str, object]]) -> list[Map]:
    stages = [from_plain(s, DEFAULT_ORIGIN) for s in plain]
    assert all(isinstance(s, Map) for s in stages)
    return stages  # type: ignore[return-value]


def test_stage_env_reads_the_named_variables_of_one_stage() -> None:
    stages = _stages([
        {"stage_id": 1, "env": {"A": "x"}},
        {"stage_id": 2, "env": {"A": True, "B": 3, "C": None, "D": "not asked"}},
    ])  # fmt: skip
    found = stage_env(stages, 2, ("A", "B", "C"))
    assert {name: var.value for name, var in found.items()} == {
        "A": "true",
        "B": "3",
    }  # as the process sees it
    assert found["A"].origin.endswith("(stages[2] env)")
    assert stage_env(stages, None, ("A",)) == {} and stage_env(stages, 3, ("A",)) == {}


def test_ray_stages_are_read_from_a_platform_view_stage_first() -> None:
    d = Deployment.load(str(ROOT / "tests" / "data" / "explain" / "ray_stage_env.yaml"))
    found = ray_stages(d.on("cuda"))
    assert list(found) == [2] and "ray_stage_env.yaml" in found[2]
    assert ray_stages(None) == {}

"""integrations.targets: the code shapes the patches rely on, read from source text."""

from __future__ import annotations

import pytest

from omni_deploy.integrations.speaker_rules import MODELS, VERIFIED_VLLM_OMNI
from omni_deploy.integrations.targets import BY_MODEL, TARGETS, Shape, shape_problem, shape_problems
from omni_deploy.knowledge.versions import RELEASES

SOURCE = """
from .voice_clone import load_voice_clone_frontend as loader

class Core:
    def __init__(self):
        self._spk_model = None

    def forward(self, spk_feat):
        return self._spk_model(spk_feat)

def build(self, model_dir, config):
    return {"campplus_session": None}
"""


@pytest.mark.parametrize(
    ("shape", "problem"),
    [
        (Shape("m", ("Core", "forward"), ("self", "spk_feat"), ("self._spk_model(",)), None),
        (Shape("m", ("build",), ("self", "model_dir", "config"), ('"campplus_session"',)), None),
        (Shape("m", ("loader",)), None),  # a name the module imports counts as defined there
        (Shape("m", ("Core", "missing")), "Core.missing not found in m"),
        (Shape("m", ("Gone",)), "Gone not found in m"),
        (Shape("m", ("Core", "forward"), ("self",)), "Core.forward(self, spk_feat) is not (self)"),
        (Shape("m", ("Core", "forward"), None, ("session.run(",)), "no longer contains 'session.run('"),
        (Shape("m", ("Core", "loader")), "Core.loader not found"),  # imports count at module level only
    ],
)
def test_shapes_are_read_from_the_source(shape: Shape, problem: str | None) -> None:
    found = shape_problem(shape, SOURCE)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_unreadable_source_is_a_problem_not_a_crash() -> None:
    assert shape_problem(Shape("m", ("x",)), None) == "m not found"
    assert "does not parse" in str(shape_problem(Shape("m", ("x",)), "def (:"))


def test_every_model_of_the_rules_has_a_target() -> None:
    assert set(BY_MODEL) == {m.pipeline for m in MODELS.values()} and len(TARGETS) == len(BY_MODEL)
    for target in TARGETS:
        assert target.patch.startswith("omni_deploy.integrations.") and ":" in target.patch
        assert target.shapes and all(s.module.startswith("vllm_omni.") for s in target.shapes)


def test_verified_releases_are_releases_of_the_knowledge_data() -> None:
    assert set(VERIFIED_VLLM_OMNI) <= set(RELEASES)


def test_shape_problems_reads_each_module_once() -> None:
    reads: list[str] = []

    def read(module: str) -> str | None:
        reads.append(module)
        return None

    target = BY_MODEL["minicpmo_4_5"]
    assert len(shape_problems(target, read)) == len(target.shapes)
    assert sorted(reads) == sorted({s.module for s in target.shapes})


@pytest.mark.upstream
def test_the_verified_release_has_every_shape_the_patches_rely_on() -> None:
    from tests.support.upstream import VERSION, wheel_root

    assert VERSION in VERIFIED_VLLM_OMNI
    root = wheel_root()

    def read(module: str) -> str | None:
        path = root / (module.replace(".", "/") + ".py")
        return path.read_text(encoding="utf-8") if path.is_file() else None

    for target in TARGETS:
        assert shape_problems(target, read) == [], target.model.pipeline

"""integrations.targets: the code shapes the patches rely on, read from source text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omni_deploy.integrations.speaker_rules import MODELS, VERIFIED_VLLM_OMNI
from omni_deploy.integrations.targets import (
    BY_MODEL,
    TARGETS,
    Shape,
    recognise,
    shape_problem,
    shape_problems,
)
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


LAYOUTS = json.loads((Path(__file__).parents[1] / "data" / "integrations" / "layouts.json").read_text())


@pytest.mark.upstream
@pytest.mark.parametrize("version", [v for v in LAYOUTS if not v.startswith("_")])
def test_each_release_is_recognised_by_its_own_code(version: str) -> None:
    from tests.support.upstream import CACHE, unpacked

    root = unpacked(version, CACHE / f"vllm_omni-{version}")

    def read(module: str) -> str | None:
        path = root / (module.replace(".", "/") + ".py")
        return path.read_text(encoding="utf-8") if path.is_file() else None

    found = {t.model.pipeline: recognise(t, read) for t in TARGETS}
    assert {name: r.layout for name, r in found.items()} == LAYOUTS[version], found


def test_code_of_no_known_layout_is_refused_naming_each_layout() -> None:
    target = BY_MODEL["minicpmo_4_5"]
    # Every shape the target needs, and none of either layout's.
    sources = {
        "vllm_omni.model_executor.models.minicpmo_4_5.minicpmo_4_5_code2wav": (
            "class MiniCPMO45Code2Wav:\n    def _build_backend(self):\n        pass\n"
        ),
        "vllm_omni.model_executor.models.step_audio2.step_audio2_token2wav": (
            "class StepAudio2Token2WavCore:\n"
            "    def __init__(self):\n        self._spk_model = None\n"
            "    def _forward_spk_embedding(self, spk_feat):\n        return self._spk_model(spk_feat)\n"
        ),
    }
    found = recognise(target, sources.get)
    assert found.layout is None
    assert [p.split(" (")[0] for p in found.problems] == [f"not {layout.name}" for layout in target.layouts]
    assert shape_problems(target, sources.get) == found.problems

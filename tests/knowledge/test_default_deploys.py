"""A file without `pipeline:` is matched to a registered pipeline by its name, or by the pipeline's
own default deploy file (default_deploy_config_name, read from each release's registry)."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_deploy.knowledge.pipelines import default_deploys, infer_registered


def test_the_registry_names_each_pipelines_default_deploy_file() -> None:
    defaults = default_deploys("0.30.0")
    assert defaults["moss_tts"] == "moss_tts_delay"
    assert defaults["audio8_tts"] == "arktts"
    assert defaults["minicpmo_4_5"] == "minicpmo_4_5"


@pytest.mark.parametrize(
    ("name", "pipeline"),
    [
        ("moss_tts.yaml", "moss_tts_delay"),
        ("moss_ttsd.yaml", "moss_tts_delay"),  # a variant named after the default file
        ("moss_tts_nano.yaml", "moss_tts_nano"),  # a registered name wins when longer
        ("audio8_tts.yaml", "arktts"),
        ("minicpmo_4_5_turn.yaml", "minicpmo_4_5"),
        ("moss_voice_generator.yaml", None),  # only the model's architecture names it
    ],
)
def test_a_file_name_implies_its_pipeline(name: str, pipeline: str | None) -> None:
    assert infer_registered([Path(name)], version="0.30.0") == pipeline

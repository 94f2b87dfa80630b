"""The Deployment model: one load gives chain, pipeline, stages, Code2Wav extra, platform views, origins."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_deploy.common.errors import ConfigError
from omni_deploy.config.nodes import to_plain
from omni_deploy.deployment.model import Deployment

ROOT = Path(__file__).resolve().parents[2]


def test_bundled_overlay_resolves_its_chain_and_pipeline() -> None:
    d = Deployment.load(str(ROOT / "deploy" / "turn-bench.yaml"))
    assert [p.name for p in d.chain] == ["turn-bench.yaml", "minicpmo_4_5_turn.yaml"]
    assert d.pipeline.is_minicpmo
    assert to_plain(d.stage(2).get("stage_id")) == 2  # type: ignore[union-attr]
    found = d.code2wav_connector()
    assert found is not None and d.code2wav_extra_path == f"$.connectors.{found[0]}.extra"
    assert d.code2wav_extra() is found[1].get("extra")
    assert d.default_platforms()[0] == "cuda"


def test_platform_views_are_computed_once_and_keep_origins() -> None:
    d = Deployment.load(str(ROOT / "deploy" / "turn-bench.yaml"))
    assert d.on("cuda") is d.on("cuda")
    assert d.code2wav_extra_on("cuda") is not None
    node, key_origin = d.locate(["stages", 0, "max_num_seqs"])
    assert node is not None and key_origin is not None
    assert key_origin.file.endswith("turn-bench.yaml") and key_origin.layer == "overlay"


def test_an_unloadable_name_raises_config_error_with_its_code() -> None:
    with pytest.raises(ConfigError) as caught:
        Deployment.load(str(ROOT / "tests" / "data" / "loader" / "negative" / "no_such_file.yaml"))
    assert caught.value.code == "E107"


def test_connector_extra_is_the_named_connectors_extra_else_a_placeholder_path() -> None:
    d = Deployment.load(str(ROOT / "tests" / "data" / "explain" / "models" / "ming_tts.yaml"))
    extra, path = d.connector_extra(0, "output")
    assert extra is not None and path.startswith("$.connectors.") and path.endswith(".extra")
    assert d.connector_extra(None, "output") == (None, "$.connectors.<stage None output>.extra")
    assert d.connector_extra(99, "input") == (None, "$.connectors.<stage 99 input>.extra")

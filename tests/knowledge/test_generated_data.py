"""The committed upstream_keys.json is what the generator reads from every released wheel today."""

from __future__ import annotations

import pytest

from omni_deploy.knowledge.generate import DATA_FILE, generate

pytestmark = pytest.mark.upstream


def test_data_file_has_not_drifted() -> None:
    assert DATA_FILE.read_text() == generate(), "run: python -m omni_deploy.knowledge.generate"


def test_facts_file_has_not_drifted() -> None:
    from omni_deploy.knowledge.generate import FACTS_FILE, generate_facts

    assert FACTS_FILE.read_text() == generate_facts(), "run: python -m omni_deploy.knowledge.generate"


def test_facts_name_their_lines_and_the_issue_s_cases() -> None:
    import json

    from omni_deploy.knowledge.generate import FACTS_FILE

    versions = json.loads(FACTS_FILE.read_text())["versions"]
    for version, entry in versions.items():
        for name, at in entry["facts"].items():
            assert at.startswith("vllm_omni/") and at.rsplit(":", 1)[1].isdigit(), (version, name, at)
    minicpmo = {v: e["pipelines"].get("minicpmo_4_5") for v, e in versions.items()}
    assert minicpmo["0.20.0"] is None
    counts = [len(minicpmo[v]["stages"]) for v in ("0.22.0", "0.24.0", "0.26.0", "0.28.0", "0.30.0")]
    assert counts == [2, 2, 3, 3, 3]
    assert "duplex_session_splat" in versions["0.28.0"]["facts"]
    assert "typed_config_at_startup" in versions["0.30.0"]["facts"]
    assert "typed_config_at_startup" not in versions["0.28.0"]["facts"]
    assert "spk_embedding_hook" not in versions["0.26.0"]["facts"]


def test_stage_fields_file_has_not_drifted() -> None:
    from omni_deploy.knowledge.generate import STAGE_FIELDS_FILE, generate_stage_fields

    assert STAGE_FIELDS_FILE.read_text() == generate_stage_fields(), (
        "run: python -m omni_deploy.knowledge.generate"
    )


def test_stage_schema_per_release_from_its_code() -> None:
    """0.31 made model_runner a stage wrapper key; 0.32 added the kernel backends and dropped
    auxiliary_text_encoder: each release's own StageDeployConfig, never 0.30.0's for all."""
    from omni_deploy.config.stage_schema import stage_fields_data

    data = stage_fields_data()
    assert "model_runner" not in data["0.30.0"]["reserved"]
    assert "model_runner" in data["0.31.0rc1"]["reserved"] and "model_runner" in data["0.32.0rc1"]["reserved"]
    for key in ("attention_backend", "moe_backend", "linear_backend", "enable_cuda_graph_decode"):
        assert key in data["0.32.0rc1"]["fields"] and key not in data["0.30.0"]["fields"], key
    assert "auxiliary_text_encoder" in data["0.30.0"]["fields"]
    assert "auxiliary_text_encoder" not in data["0.32.0rc1"]["fields"]
    assert data["0.30.0"]["owners_digest"] != data["0.32.0rc1"]["owners_digest"]

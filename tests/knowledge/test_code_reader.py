"""The code reader over a stand-in source tree: what it counts as a read, with line and default."""

from __future__ import annotations

from pathlib import Path

from omni_deploy.knowledge.code_reader import NO_DEFAULT, legacy_stage_args, read_tree, tree_digest
from omni_deploy.knowledge.generate import version_entry

TREE = Path(__file__).resolve().parents[1] / "data" / "knowledge" / "unreleased"
STAGE_CONFIG = "vllm_omni/config/stage_config.py"
CODE2WAV = "vllm_omni/model_executor/models/minicpmo_4_5/minicpmo_4_5_code2wav.py"


def _places() -> dict[str, dict[str, dict[str, object]]]:
    return version_entry(read_tree(TREE))


def test_top_level_keys_from_the_dataclass_and_the_loader() -> None:
    top = _places()["top"]
    assert set(top) == {
        "async_chunk", "session_mode", "model_runner", "connectors", "stages", "platforms", "pipeline",
        "speech_cache", "base_config", "stage_args",
    }  # fmt: skip
    assert top["async_chunk"]["default"] is True
    assert top["stages"]["default"] == []
    assert top["stage_args"]["refused"] is True
    assert top["speech_cache"]["at"] == [f"{STAGE_CONFIG}:28", f"{STAGE_CONFIG}:48"]  # field, loader


def test_stage_and_platform_stage_keys() -> None:
    places = _places()
    assert set(places["stage"]) == {
        "stage_id", "devices", "num_replicas", "output_connectors", "input_connectors", "max_num_seqs",
        "max_model_len", "gpu_memory_utilization", "engine_extras",
    }  # fmt: skip
    assert places["stage"]["num_replicas"]["default"] == 1
    assert {"stage_id", "devices", "max_num_seqs"} <= set(places["platform_stage"])
    assert set(places["platform"]) == {"stages", "model_runner"}
    assert set(places["connector"]) == {"name", "extra"}
    assert set(places["stage2_additional_config"]) == {"code2wav_enable_npu_graph", "code2wav_max_npu_graphs"}


def test_code2wav_reads_with_defaults_constants_and_code() -> None:
    code2wav = _places()["code2wav"]
    assert code2wav["token2wav_allow_tf32"] == {"at": [f"{CODE2WAV}:9"], "default": False}
    assert "default" not in code2wav["hift_graph_exact_batch_sizes"]  # `.get(key)` states none
    assert code2wav["whole_euler_pad_max_rows"]["default"] == 16  # module constant, evaluated
    assert code2wav["token2wav_s3tokenizer_device"]["default_code"] == "os.environ.get('S3_DEVICE', 'cuda')"
    assert code2wav["codec_chunk_frames"] == {"at": [f"{CODE2WAV}:13"]}


def test_no_default_is_never_a_key() -> None:
    assert all(r.key != repr(NO_DEFAULT) for r in read_tree(TREE))


def test_digest_follows_the_files(tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "tree"
    shutil.copytree(TREE, copy)
    assert tree_digest(copy) == tree_digest(TREE)
    (copy / CODE2WAV).write_text((copy / CODE2WAV).read_text() + "\n# changed\n")
    assert tree_digest(copy) != tree_digest(TREE)
    assert legacy_stage_args(copy) is None

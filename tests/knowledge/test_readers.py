"""Who reads a key at a target: the generated reads joined with the hand table."""

from __future__ import annotations

from omni_deploy.knowledge import readers
from omni_deploy.knowledge.target import resolve_target


def _kind(place: str, name: str, version: str) -> str:
    return readers.status(place, name, resolve_target(version)).kind


def test_kinds_across_releases() -> None:
    assert _kind("stage", "stage_id", "0.20.0") == readers.READ  # was W310 before 0.30.0 knowledge
    assert _kind("stage", "env", "0.20.0") == readers.NOT_READ  # a stage field from 0.22.0 on
    assert _kind("stage", "kv_cache_memory_bytes", "0.20.0") == readers.ENGINE_ARGUMENT
    assert _kind("top", "stage_args", "0.24.0") == readers.LEGACY
    assert _kind("top", "stage_args", "0.28.0") == readers.REFUSED
    # 0.26.0 reads the chunking keys outside the model folder, in its stage input processor
    # (model_executor/stage_input_processors/minicpmo_4_5_omni.py:133-134); the HiFT graph it does not.
    assert _kind("code2wav", "codec_chunk_frames", "0.26.0") == readers.READ
    assert _kind("code2wav", "enable_hift_graph", "0.26.0") == readers.NOT_READ
    assert _kind("code2wav", "codec_chunk_frames", "0.28.0") == readers.READ
    assert _kind("code2wav", "token2wav_device_spk", "0.30.0") == readers.BY_PLUGIN
    assert _kind("code2wav", "connector_get_sleep_s", "0.30.0") == readers.NOT_READ
    assert _kind("platform", "cuda_mps", "0.30.0") == readers.NOT_READ
    assert _kind("top", "platfroms", "0.30.0") == readers.UNKNOWN


def test_messages_name_the_versions_that_read_it() -> None:
    status = readers.status("code2wav", "ref_audio_max_seconds", resolve_target("0.28.0"))
    assert (
        status.message
        == "'ref_audio_max_seconds' is read by vllm-omni 0.30.0-0.32.0rc1 only; vllm-omni 0.28.0 ignores it"
    )
    none = readers.status("code2wav", "connector_get_sleep_s", resolve_target("0.32.0rc1"))
    assert none.message == (
        "'connector_get_sleep_s' is read by no vllm-omni release; vllm-omni 0.32.0rc1 ignores it"
    )
    # 0.31 reads the CFM micro-batch (0.31.0rc1 model_executor/models/minicpmo_4_5/minicpmo_4_5_code2wav.py:284).
    later = readers.status("code2wav", "micro_batch_size", resolve_target("0.30.0"))
    assert later.message == (
        "'micro_batch_size' is read by vllm-omni 0.31.0rc1-0.32.0rc1 only; vllm-omni 0.30.0 ignores it"
    )
    assert _kind("code2wav", "micro_batch_size", "0.32.0rc1") == readers.READ


def test_typo_candidates_include_other_readers() -> None:
    names = readers.known_names("stage", resolve_target("0.30.0"))
    assert {"max_num_seqs", "kv_cache_memory_bytes"} <= names
    assert "token2wav_device_spk" in readers.known_names("code2wav", resolve_target("0.30.0"))

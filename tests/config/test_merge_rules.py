"""The merge rules on small written-out cases, with provenance of every layer."""

from __future__ import annotations

from pathlib import Path

from omni_deploy.config.chain import resolve_file
from omni_deploy.config.nodes import Map, Seq, to_plain
from omni_deploy.config.platform import apply_platform


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


BASE = """\
session_mode: duplex
duplex_session:
  max_sessions: 4
  idle_ttl_s: 60
connectors:
  shm:
    name: SharedMemoryConnector
    extra:
      codec_chunk_frames: 25
      enable_cfm_graph: true
stages:
  - stage_id: 0
    max_num_seqs: 4
    limit_mm_per_prompt: {image: 64, audio: 64, video: 1}
    env: {A: "1", B: "2"}
    default_sampling_params: {temperature: 0.0, top_p: 1.0}
  - stage_id: 1
    max_num_seqs: 4
    devices: "0"
platforms:
  cuda:
    stages:
      - stage_id: 1
        kv_cache_memory_bytes: 2147483648
"""

OVERLAY = """\
base_config: base.yaml
duplex_session:
  max_sessions: 8
connectors:
  shm:
    extra:
      codec_chunk_frames: 50
stages:
  - stage_id: 0
    limit_mm_per_prompt: {audio: 0}
    env: {A: "9"}
    default_sampling_params: {temperature: 0.7}
  - stage_id: 5
    max_num_seqs: 1
platforms:
  cuda:
    stages:
      - stage_id: 1
        devices: "1"
      - stage_id: 7
        max_num_seqs: 2
"""


def test_rules(tmp_path: Path) -> None:
    _write(tmp_path, "base.yaml", BASE)
    resolved = resolve_file(_write(tmp_path, "overlay.yaml", OVERLAY))
    config = to_plain(resolved.config)
    # Top level is shallow: the overlay's duplex_session replaces the base mapping whole.
    assert config["duplex_session"] == {"max_sessions": 8}
    # Connectors merge recursively.
    assert config["connectors"]["shm"]["extra"] == {"codec_chunk_frames": 50, "enable_cfm_graph": True}
    assert config["connectors"]["shm"]["name"] == "SharedMemoryConnector"
    stage0 = config["stages"][0]
    # Stage keys other than the five deep-merge keys are replaced whole.
    assert stage0["limit_mm_per_prompt"] == {"audio": 0}
    assert stage0["env"] == {"A": "9"}
    # The deep-merge keys merge.
    assert stage0["default_sampling_params"] == {"temperature": 0.7, "top_p": 1.0}
    assert stage0["max_num_seqs"] == 4
    # New stages are appended in overlay order; base order kept.
    assert [s["stage_id"] for s in config["stages"]] == [0, 1, 5]
    # Platform stages merge by stage_id too.
    cuda_stages = config["platforms"]["cuda"]["stages"]
    assert cuda_stages[0] == {"stage_id": 1, "kv_cache_memory_bytes": 2147483648, "devices": "1"}
    # What a replace threw away is reported.
    lost = {d.path: d.lost for d in resolved.report.dropped}
    assert lost["$.duplex_session"] == ("idle_ttl_s",)
    assert lost["$.stages[?@.stage_id==0].limit_mm_per_prompt"] == ("image", "video")
    assert lost["$.stages[?@.stage_id==0].env"] == ("B",)


def test_provenance_of_base_overlay_and_platform(tmp_path: Path) -> None:
    _write(tmp_path, "base.yaml", BASE)
    resolved = resolve_file(_write(tmp_path, "overlay.yaml", OVERLAY))
    stages = resolved.config.get("stages")
    assert isinstance(stages, Seq)
    stage0 = stages.items[0]
    assert isinstance(stage0, Map)
    seqs = stage0.get("max_num_seqs")
    assert seqs is not None and (seqs.origin.line, seqs.origin.layer) == (13, "base")
    assert seqs.origin.file.endswith("base.yaml")
    sampling = stage0.get("default_sampling_params")
    assert isinstance(sampling, Map)
    temperature = sampling.get("temperature")
    assert temperature is not None and (temperature.origin.line, temperature.origin.layer) == (12, "overlay")
    applied = apply_platform(resolved.config, "cuda")
    stage1 = applied.stages[1]
    devices = stage1.get("devices")
    assert devices is not None and devices.origin.layer == "platform:cuda" and devices.origin.line == 19
    extras = stage1.get("engine_extras")
    assert isinstance(extras, Map)
    kv = extras.get("kv_cache_memory_bytes")
    assert kv is not None and kv.origin.file.endswith("base.yaml") and kv.origin.layer == "platform:cuda"
    # The entry for a stage that does not exist is skipped, and remembered.
    assert [(s.stage_id, s.origin.line) for s in applied.skipped] == [(7, 20)]


def test_platform_none_keeps_platform_sections(tmp_path: Path) -> None:
    _write(tmp_path, "base.yaml", BASE)
    config = to_plain(resolve_file(_write(tmp_path, "overlay.yaml", OVERLAY)).config)
    assert "platforms" in config


def test_platform_env_merges_and_devices_replace(tmp_path: Path) -> None:
    doc = _write(
        tmp_path,
        "p.yaml",
        "stages:\n  - stage_id: 0\n    devices: '0'\n    env: {A: '1'}\n"
        "platforms:\n  rocm:\n    model_runner: v2\n    stages:\n"
        "      - stage_id: 0\n        devices: '2'\n        env: {B: '2'}\n"
        "        max_num_seqs: 3\n        default_sampling_params: {seed: 1}\n",
    )
    applied = apply_platform(resolve_file(doc).config, "rocm")
    config = to_plain(applied.config)
    assert config["model_runner"] == "v2"
    assert config["stages"][0] == {
        "stage_id": 0,
        "devices": "2",
        "env": {"A": "1", "B": "2"},
        "default_sampling_params": {"seed": 1},
        "max_num_seqs": 3,
    }
    assert "platforms" not in config

"""The deployment at a glance, per platform: stages, devices, and the Code2Wav knobs that matter."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from omni_deploy.config.nodes import Map, to_plain
from omni_deploy.config.platform import PlatformApplied
from omni_deploy.config.stage_process import stage_value
from omni_deploy.knowledge.pipelines import PipelineInfo

CODE2WAV_KNOBS = (
    "codec_chunk_frames",
    "codec_left_context_frames",
    "micro_batch_size",
    "enable_cfm_graph",
    "cfm_max_graphs",
    "cfm_graph_bucket_frames",
    "enable_hift_graph",
    "hift_graph_capture_batch_sizes",
    "token2wav_allow_tf32",
    "token2wav_device_spk",
    "token2wav_device_prepare",
    "token2wav_trt",
)


def _field(stage: Map, name: str) -> Any:
    node = stage_value(stage, name)
    return to_plain(node, unresolved=True) if node is not None else None  # ${oc.env:...} as written


def overview(
    applied: PlatformApplied, pipeline: PipelineInfo, code2wav: Map | None, speaker: str
) -> dict[str, Any]:
    roles = pipeline.known.stages if pipeline.known else {}
    stages = []
    devices: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"stages": [], "gpu_memory_utilization": 0.0, "kv_cache_bytes": 0}
    )
    for stage in applied.stages:
        sid = to_plain(stage.get("stage_id"))
        row = {
            "stage_id": sid,
            "role": roles.get(sid, "") if isinstance(sid, int) else "",
            "devices": _field(stage, "devices"),
            "num_replicas": _field(stage, "num_replicas") or 1,
            "max_num_seqs": _field(stage, "max_num_seqs"),
            "max_model_len": _field(stage, "max_model_len"),
            "max_num_batched_tokens": _field(stage, "max_num_batched_tokens"),
            "kv_cache_memory_bytes": _field(stage, "kv_cache_memory_bytes"),
            "gpu_memory_utilization": _field(stage, "gpu_memory_utilization"),
        }
        stages.append(row)
        for device in [d.strip() for d in str(row["devices"] or "").split(",") if d.strip()]:
            entry = devices[device]
            entry["stages"].append(sid)
            util = row["gpu_memory_utilization"]
            if isinstance(util, (int, float)) and not isinstance(util, bool):
                entry["gpu_memory_utilization"] = round(entry["gpu_memory_utilization"] + util, 6)
            kv = row["kv_cache_memory_bytes"]
            if isinstance(kv, int) and not isinstance(kv, bool):
                entry["kv_cache_bytes"] += kv
    knobs = {
        name: to_plain(code2wav.get(name), unresolved=True) if code2wav and name in code2wav else None
        for name in CODE2WAV_KNOBS
    }
    return {
        "model_runner": applied.model_runner,
        "stages": stages,
        "devices": dict(sorted(devices.items())),
        "code2wav": {**knobs, "speaker_backend": speaker} if pipeline.is_minicpmo else None,
    }

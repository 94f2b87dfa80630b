# Stand-in: the shape of vllm-omni's stage_config.py, with one key no release reads (speech_cache).
from dataclasses import dataclass, field
from typing import Any


@dataclass
class StageDeployConfig:
    stage_id: int
    devices: str | None = None
    num_replicas: int = 1
    output_connectors: dict[str, str] | None = None
    input_connectors: dict[str, str] | None = None
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    engine_extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class DeployConfig:
    async_chunk: bool = True
    session_mode: str = "turn"
    model_runner: str = "v1"
    connectors: dict[str, Any] | None = None
    stages: list[StageDeployConfig] = field(default_factory=list)
    platforms: dict[str, Any] | None = None
    pipeline: str | None = None
    speech_cache: dict[str, Any] | None = None


_STAGE_RESERVED_KEYS = frozenset({"stage_id", "devices", "num_replicas", "engine_extras"})

_WINDOW = 4 * 1024


def resolve_deploy_yaml(path):
    raw_dict = {}
    raw_dict.pop("base_config", None)
    return raw_dict


def load_deploy_config(path):
    raw_dict = resolve_deploy_yaml(path)
    if "stage_args" in raw_dict:
        raise ValueError("removed")
    return DeployConfig(
        async_chunk=raw_dict.get("async_chunk", True),
        speech_cache=raw_dict.get("speech_cache"),
        stages=[_parse_stage_deploy(s) for s in raw_dict.get("stages", [])],
    )


def _parse_stage_deploy(stage_data):
    return StageDeployConfig(stage_id=stage_data["stage_id"], devices=stage_data.get("devices"))


def _apply_platform_overrides(deploy, platform):
    platform_section = (deploy.platforms or {}).get(platform)
    print(platform_section.get("model_runner"))
    for ps in platform_section.get("stages", []):
        print(ps["stage_id"], ps.get("devices"), _WINDOW)

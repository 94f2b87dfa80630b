# A stand-in for a vllm-omni main checkout (not vllm-omni's code).
from dataclasses import dataclass


@dataclass
class StageDeployConfig:
    stage_id: int
    model_runner: str | None = None
    max_num_seqs: int | None = None


_STAGE_RESERVED_KEYS = frozenset({"stage_id", "model_runner", "engine_extras", "engine_args", "runtime"})


def _parse_stage_deploy(stage_data):
    return StageDeployConfig(stage_id=stage_data["stage_id"], max_num_seqs=stage_data.get("max_num_seqs"))


def load_deploy_config(raw_dict):
    return [_parse_stage_deploy(s) for s in raw_dict.get("stages", [])]

"""What a stage's process sees of its environment: the decision variables the deploy file sets in
a stage's `env`, and what Ray workers keep of it. The Code2Wav decision (`decision`) and the other
models' (`other_models`) both read a stage's environment this way."""

from __future__ import annotations

from collections.abc import Mapping

from omni_deploy.config.nodes import Map, Scalar, to_plain
from omni_deploy.integrations.speaker_rules import DECISION_ENV, ray_fix, ray_view
from omni_deploy.speaker_backend.types import StageEnv


def stage_env(
    stages: list[Map], stage_id: object, names: tuple[str, ...] = DECISION_ENV
) -> dict[str, StageEnv]:
    """The decision variables (`names`) the (platform-applied) stage `stage_id` sets in its environment."""
    found: dict[str, StageEnv] = {}
    for stage in stages:
        sid = stage.get("stage_id")
        if stage_id is None or not isinstance(sid, Scalar) or sid.value != stage_id:
            continue
        env = stage.get("env")
        if not isinstance(env, Map):
            continue
        for name in names:
            node = env.get(name)
            if isinstance(node, Scalar) and node.value is not None:
                value = to_plain(node)
                text = str(value).lower() if isinstance(value, bool) else str(value)
                found[name] = StageEnv(text, f"{node.origin} (stages[{stage_id}] env)")
    return found


def ray_env_warnings(
    stage_label: str, origin: str, stage_environ: Mapping[str, str], names: tuple[str, ...], keys_hint: str
) -> tuple[dict[str, str], list[str]]:
    """What the Ray workers of a stage see of its environment, and a warning per setting that stays
    behind (vllm/ray/ray_env.py copies only VLLM_*, HF_*, NCCL_*, ... and what it is told to)."""
    seen = ray_view(stage_environ)
    dropped = [n for n in names if n in stage_environ and n not in seen]
    warnings = []
    if dropped:
        warnings.append(
            f"{stage_label} runs its model in Ray workers (distributed_executor_backend: ray at {origin}): vLLM does "
            f"not copy {', '.join(f'{n}={stage_environ[n]}' for n in dropped)} to them, so the workers decide "
            f"without it; say it with the file's keys ({keys_hint}), or have vLLM copy it: "
            f"{ray_fix(dropped, stage_environ)}"
        )
    return seen, warnings

"""What Ray workers keep of a stage's environment, and a warning for each decision variable they
lose: the Code2Wav decision (`decision`) and Ming-TTS's (`other_models`) both decide with it."""

from __future__ import annotations

from collections.abc import Mapping

from omni_deploy.integrations.speaker_rules import ray_fix, ray_view


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

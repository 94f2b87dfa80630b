"""What a stage's process gets from a deploy file: a value as its engine reads it, the variables
the stage sets in its environment, and whether its model runs in Ray workers.

Readers of a normalised stage list (a platform view's `stages`, or the merged file's), no more:
what the values mean for the speaker backend is `speaker_backend`'s business.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from omni_deploy.config.nodes import Map, Node, Scalar, to_plain

if TYPE_CHECKING:
    from omni_deploy.config.platform import PlatformApplied


def stage_value(stage: Map, name: str) -> Node | None:
    """A stage's value for `name` as the engine gets it: the typed field, else the same key in
    `engine_extras` (a key the stage schema has no field for is gathered there on load, and a
    platform section may set it either way). None when neither has it."""
    node = stage.get(name)
    if node is None:
        extras = stage.get("engine_extras")
        node = extras.get(name) if isinstance(extras, Map) else None
    return node


@dataclass(frozen=True)
class StageEnv:
    """A variable the deploy file sets for a stage (`runtime.env`, `env`, or a platform section's
    stage `env`), which vllm-omni applies when it spawns that stage."""

    value: str
    origin: str


def stage_env(stages: list[Map], stage_id: object, names: tuple[str, ...]) -> dict[str, StageEnv]:
    """The variables among `names` that the stage `stage_id` sets in its environment."""
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


def ray_stages(view: PlatformApplied | None) -> dict[int, str]:
    """Stages whose model runs in Ray workers (`distributed_executor_backend: ray`, on the stage or
    pipeline-wide) in a platform view, with where that was set; none without a view."""
    if view is None:
        return {}
    top = view.config.get("distributed_executor_backend")
    found = {}
    for stage in view.stages:
        sid = stage.get("stage_id")
        node = stage_value(stage, "distributed_executor_backend") or top
        if (
            isinstance(sid, Scalar)
            and isinstance(sid.value, int)
            and isinstance(node, Scalar)
            and node.value == "ray"
        ):
            found[sid.value] = str(node.origin)
    return found

"""Which GPUs each stage uses, and which stages share a node.

Device ids in a deploy file are logical indices into the launcher's CUDA_VISIBLE_DEVICES. A stage
with `num_replicas` > 1 lists either the whole pool (one slice per replica) or one replica's
template that vllm-omni 0.30.0 shifts per replica (engine/stage_init_utils.py,
split_devices_for_replicas). A stage runs on one node: its replicas and tensor-parallel ranks are
local processes of the master or of one headless launcher.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from omni_deploy.common.errors import OmniDeployError
from omni_deploy.config.nodes import Map, Scalar, to_plain
from omni_deploy.config.platform import PlatformApplied
from omni_deploy.config.stage_process import stage_value
from omni_deploy.knowledge.pipelines import PipelineInfo


class PlacementError(OmniDeployError):
    """The stages cannot be placed on nodes of the given size."""

    def __init__(self, message: str, stage_id: int | None = None) -> None:
        super().__init__(message)
        self.stage_id = stage_id  # the stage at fault, for a finding's place


@dataclass(frozen=True)
class StageUse:
    stage_id: int
    role: str
    devices: tuple[int, ...]  # logical device ids, replicas included, in the file's numbering
    replicas: int
    per_replica: int  # tensor_parallel_size * pipeline_parallel_size
    written: str | None  # `devices` as the file has it

    @property
    def label(self) -> str:
        return f"stage {self.stage_id}" + (f" ({self.role})" if self.role else "")


@dataclass(frozen=True)
class NodeGroup:
    """The stages one pod runs; the pod sees its GPUs as 0..n-1."""

    index: int
    stages: tuple[StageUse, ...]

    @property
    def devices(self) -> tuple[int, ...]:
        return tuple(sorted({d for s in self.stages for d in s.devices}))

    @property
    def gpus(self) -> int:
        return len(self.devices)

    def pod_devices(self, stage: StageUse) -> str | None:
        """The stage's `devices` in the pod's numbering; None when the file's already fit."""
        if stage.written is None:
            return None
        position = {d: i for i, d in enumerate(self.devices)}
        written = [int(d) for d in _split(stage.written)]
        shift = [position[d] for d in written] if all(d in position for d in written) else None
        if shift is None:  # template mode: offsets stay valid inside the replica pool
            return None
        renumbered = ",".join(str(d) for d in shift)
        return None if shift == written else renumbered


def _split(text: str) -> list[str]:
    return [d.strip() for d in text.split(",") if d.strip()]


MAX_PER_STAGE = 4096  # replicas, or GPUs of one replica: beyond any node; lists stay small


def _positive_int(stage: Map, name: str, default: int) -> int:
    node = stage_value(stage, name)
    value = to_plain(node) if node is not None else None
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PlacementError(f"{name} must be a positive integer, got {value!r}")
    if value > MAX_PER_STAGE:  # placement lists every device of every replica
        raise PlacementError(f"{name} {value} is more than omni-deploy places on nodes ({MAX_PER_STAGE})")
    return value


def stage_use(stage: Map, role: str) -> StageUse:
    sid = to_plain(stage.get("stage_id"))
    if not isinstance(sid, int) or isinstance(sid, bool):
        raise PlacementError(f"stage_id must be an integer, got {sid!r}")
    replicas = _positive_int(stage, "num_replicas", 1)
    per_replica = _positive_int(stage, "tensor_parallel_size", 1) * _positive_int(
        stage, "pipeline_parallel_size", 1
    )
    node = stage_value(stage, "devices")
    written = None if node is None or to_plain(node) is None else str(to_plain(node))
    if written is None:
        # No placement: every replica inherits the launcher's devices and uses the first ones.
        return StageUse(sid, role, tuple(range(per_replica)), replicas, per_replica, None)
    try:
        listed = [int(d) for d in _split(written)]
    except ValueError:
        raise PlacementError(f"stage {sid}: devices {written!r} are not integer device ids") from None
    if any(d < 0 for d in listed):
        raise PlacementError(f"stage {sid}: devices {written!r} has a negative id")
    if replicas == 1 or len(listed) == replicas * per_replica:
        devices = listed
    elif len(listed) == per_replica and all(0 <= d < per_replica for d in listed):
        devices = [r * per_replica + d for r in range(replicas) for d in listed]
    else:
        raise PlacementError(
            f"stage {sid}: devices {written!r} has {len(listed)} id(s); with num_replicas {replicas} "
            f"and {per_replica} device(s) per replica vllm-omni 0.30.0 needs {per_replica} "
            f"(one replica's template) or {replicas * per_replica} (the whole pool)"
        )
    return StageUse(sid, role, tuple(dict.fromkeys(devices)), replicas, per_replica, written)


def stage_uses(applied: PlatformApplied, pipeline: PipelineInfo) -> list[StageUse]:
    roles = pipeline.known.stages if pipeline.known else {}
    uses = [
        stage_use(stage, roles.get(to_plain(stage.get("stage_id")), ""))
        for stage in applied.stages
        if isinstance(stage.get("stage_id"), Scalar)
    ]
    if not uses:
        raise PlacementError("the deploy config has no stages")
    return sorted(uses, key=lambda s: s.stage_id)


def group_stages(uses: Iterable[StageUse], gpus_per_node: int) -> list[NodeGroup]:
    """Whole stages, in stage order, onto as few nodes as fit; GPUs are never split across nodes."""
    groups: list[list[StageUse]] = []
    for use in uses:
        if len(use.devices) > gpus_per_node:
            raise PlacementError(
                f"{use.label} uses {len(use.devices)} GPUs ({use.written or 'default devices'}, "
                f"{use.replicas} replica(s) x {use.per_replica}), more than a node's {gpus_per_node} "
                "(--gpus-per-node): a stage runs on one node; it could span nodes only through "
                "multi-node tensor parallelism, which these manifests do not set up",
                use.stage_id,
            )
        if groups:
            current = {d for s in groups[-1] for d in s.devices}
            if len(current | set(use.devices)) <= gpus_per_node:
                groups[-1].append(use)
                continue
        groups.append([use])
    placed = [NodeGroup(i, tuple(g)) for i, g in enumerate(groups)]
    _refuse_split_devices(placed)
    return placed


def _refuse_split_devices(groups: list[NodeGroup]) -> None:
    """Stages that share a GPU split its memory between them: they must share a node too."""
    owner: dict[int, tuple[NodeGroup, StageUse]] = {}
    for group in groups:
        for use in group.stages:
            for device in use.devices:
                seen = owner.get(device)
                if seen is not None and seen[0].index != group.index:
                    raise PlacementError(
                        f"{seen[1].label} and {use.label} share device {device} but do not fit on one "
                        "node together; give them separate devices or raise --gpus-per-node",
                        use.stage_id,
                    )
                owner.setdefault(device, (group, use))

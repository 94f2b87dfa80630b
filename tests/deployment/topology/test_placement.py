"""Stages onto nodes: devices per stage (replica pool and template), grouping in stage order,
renumbering per pod, and the refusals."""

from __future__ import annotations

import pytest

from omni_deploy.config.nodes import Entry, Map, Origin, Scalar
from omni_deploy.deployment.topology.placement import PlacementError, StageUse, group_stages, stage_use

AT = Origin("t.yaml", 1, 1)


def stage(**fields: object) -> Map:
    return Map({k: Entry(AT, Scalar(v, AT)) for k, v in fields.items()}, AT)


def use(sid: int, devices: str, **more: object) -> StageUse:
    return stage_use(stage(stage_id=sid, devices=devices, **more), "")


def test_devices_pool_template_and_default() -> None:
    assert use(0, "0,1,2,3", tensor_parallel_size=4).devices == (0, 1, 2, 3)
    assert use(1, "4,5,6,7", num_replicas=4).devices == (4, 5, 6, 7)  # one slice per replica
    assert use(1, "0,1", num_replicas=2, tensor_parallel_size=2).devices == (0, 1, 2, 3)  # template
    assert stage_use(stage(stage_id=2, tensor_parallel_size=2), "").devices == (0, 1)
    with pytest.raises(PlacementError, match=r"needs 2 .* or 6"):
        use(1, "0,1,2", num_replicas=3, tensor_parallel_size=2)
    with pytest.raises(PlacementError, match="not integer"):
        use(0, "cuda:0")


def test_grouping_in_stage_order() -> None:
    stages = [use(0, "0,1,2,3", tensor_parallel_size=4), use(1, "4"), use(2, "5")]
    assert [g.devices for g in group_stages(stages, 8)] == [(0, 1, 2, 3, 4, 5)]
    groups = group_stages(stages, 4)
    assert [[s.stage_id for s in g.stages] for g in groups] == [[0], [1, 2]]
    assert [g.gpus for g in groups] == [4, 2]
    assert [groups[1].pod_devices(s) for s in groups[1].stages] == ["0", "1"]
    assert groups[0].pod_devices(stages[0]) is None  # already what the pod sees


def test_stage_wider_than_a_node() -> None:
    with pytest.raises(PlacementError, match="tensor parallelism") as caught:
        group_stages([use(0, "0,1,2,3", tensor_parallel_size=4)], 2)
    assert caught.value.stage_id == 0


def test_shared_device_must_stay_on_one_node() -> None:
    stages = [use(0, "0"), use(1, "1"), use(2, "0")]
    with pytest.raises(PlacementError, match="share device 0"):
        group_stages(stages, 1)
    assert len(group_stages(stages, 2)) == 1

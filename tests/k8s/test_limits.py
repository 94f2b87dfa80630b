"""What the API server or a controller would refuse, refused before printing (omni_deploy/k8s/limits.py)."""

from __future__ import annotations

import pytest

from omni_deploy.k8s.limits import ANNOTATIONS_MAX, check_finite, check_objects, revision_room
from omni_deploy.k8s.options import K8sOptionError


def test_statefulset_names_leave_room_for_the_revision_hash() -> None:
    assert revision_room("StatefulSet", "a" * 52) == 0
    assert revision_room("StatefulSet", "a" * 53) == 1
    assert revision_room("LeaderWorkerSet", "a" * 47) == 0  # its StatefulSets are <name>-<group>


def test_a_statefulset_past_the_label_limit_is_refused() -> None:
    objects = [{"kind": "StatefulSet", "metadata": {"name": "n" * 48 + "-node0"}}]
    with pytest.raises(K8sOptionError, match="controller-revision-hash"):
        check_objects(objects, "n" * 48)


def test_pod_template_annotations_are_counted() -> None:
    big = {"a": "x" * ANNOTATIONS_MAX}
    objects = [
        {
            "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {"template": {"metadata": {"annotations": big}}},
        }
    ]
    with pytest.raises(K8sOptionError, match="256 KiB"):
        check_objects(objects, "d")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_numbers_are_refused_wherever_they_are(bad: float) -> None:
    with pytest.raises(K8sOptionError, match="finite"):
        check_finite({"affinity": {"terms": [{"weight": bad}]}}, "--values: affinity")
    check_finite({"weight": 1.5, "n": [1, 2]}, "--values")

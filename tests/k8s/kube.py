"""Checks for rendered manifests: Kubernetes 1.33's own schemas (strict) through kubernetes-validate,
the LeaderWorkerSet's fields through a schema written here, and the totals the issue promises."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = "1.33.0"
GPU = "nvidia.com/gpu"


@cache
def _lws_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(
        (ROOT / "tests" / "data" / "k8s" / "leaderworkerset.schema.json").read_text()
    )
    return schema


def validate_pod_template(template: dict[str, Any]) -> None:
    """A core PodTemplateSpec, checked as the `template` of a v1 PodTemplate."""
    wrapper = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "check"}, "template": template}
    kubernetes_validate.validate(wrapper, KUBERNETES, strict=True)


def validate_object(obj: dict[str, Any]) -> None:
    if obj["kind"] == "LeaderWorkerSet":
        jsonschema.validate(obj, _lws_schema())
        lwt = obj["spec"]["leaderWorkerTemplate"]
        for key in ("leaderTemplate", "workerTemplate"):
            validate_pod_template(lwt[key])
    else:
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)


def pod_templates(obj: dict[str, Any]) -> list[tuple[dict[str, Any], int]]:
    """Each pod template of a workload with how many pods it makes."""
    kind = obj["kind"]
    if kind in ("Deployment", "StatefulSet"):
        return [(obj["spec"]["template"], obj["spec"]["replicas"])]
    if kind == "LeaderWorkerSet":
        lwt = obj["spec"]["leaderWorkerTemplate"]
        groups = obj["spec"]["replicas"]
        return [(lwt["leaderTemplate"], groups), (lwt["workerTemplate"], groups * (lwt["size"] - 1))]
    return []


def gpu_total(objects: list[dict[str, Any]]) -> int:
    total = 0
    for obj in objects:
        for template, pods in pod_templates(obj):
            for container in template["spec"]["containers"]:
                total += pods * int(container.get("resources", {}).get("limits", {}).get(GPU, 0))
    return total


def containers(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        c for obj in objects for template, _ in pod_templates(obj) for c in template["spec"]["containers"]
    ]

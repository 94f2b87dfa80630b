"""Checks for rendered manifests: Kubernetes' own schemas (strict; 1.33 unless a test names another)
through kubernetes-validate, the LeaderWorkerSet's and the ServiceMonitor's fields through schemas
written here, and the totals the issue promises."""

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
def _schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((ROOT / "tests" / "data" / "k8s" / f"{kind}.schema.json").read_text())
    return schema


def validate_pod_template(template: dict[str, Any], version: str = KUBERNETES) -> None:
    """A core PodTemplateSpec, checked as the `template` of a v1 PodTemplate."""
    wrapper = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "check"}, "template": template}
    kubernetes_validate.validate(wrapper, version, strict=True)


def validate_claim(claim: dict[str, Any], version: str) -> None:
    wrapper = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", **claim}
    kubernetes_validate.validate(wrapper, version, strict=True)


def validate_object(obj: dict[str, Any], version: str = KUBERNETES) -> None:
    if obj["kind"] == "LeaderWorkerSet":
        jsonschema.validate(obj, _schema("leaderworkerset"))
        lwt = obj["spec"]["leaderWorkerTemplate"]
        for key in ("leaderTemplate", "workerTemplate"):
            validate_pod_template(lwt[key], version)
        for claim in lwt.get("volumeClaimTemplates", []):
            validate_claim(claim, version)
    elif obj["kind"] == "ServiceMonitor":
        jsonschema.validate(obj, _schema("servicemonitor"))
    else:
        kubernetes_validate.validate(obj, version, strict=True)


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


def pod_specs(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [template["spec"] for obj in objects for template, _ in pod_templates(obj)]


def containers(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        c for obj in objects for template, _ in pod_templates(obj) for c in template["spec"]["containers"]
    ]

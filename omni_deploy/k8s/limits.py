"""What the API server or its controllers would refuse, checked on the objects we print.

The apiserver accepts a StatefulSet whose name is 63 characters, and then its controller can never
create a pod: every pod carries `controller-revision-hash: <name>-<hash>` (a label value, at most 63
characters, the hash up to 10) and `statefulset.kubernetes.io/pod-name: <name>-<ordinal>`. A
LeaderWorkerSet makes such StatefulSets itself (`<name>` and `<name>-<group>`). Annotations of one
object may hold 256 KiB in all (keys and values). A name or an annotation set past these is a usage
error here, naming the option to change, instead of pods that never appear.
"""

from __future__ import annotations

import math
from typing import Any

from omni_deploy.k8s.options import K8sOptionError

LABEL_VALUE_MAX = 63
REVISION_HASH = 10  # characters of the hash a StatefulSet's revisions are named with (plus "-")
ANNOTATIONS_MAX = (
    256 * 1024
)  # bytes of all annotations of one object (apimachinery's TotalAnnotationSizeLimitB)


def revision_room(kind: str, name: str) -> int:
    """How many characters too long `name` is for the pods' revision label (0: it fits)."""
    longest = name if kind == "StatefulSet" else f"{name}-9999"  # LWS: <name>-<group index>
    return max(0, len(longest) + 1 + REVISION_HASH - LABEL_VALUE_MAX)


def check_objects(objects: list[dict[str, Any]], option_name: str) -> None:
    """Refuse (K8sOptionError) objects whose pods could never be created or that the API refuses."""
    for obj in objects:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        over = (
            revision_room(str(obj.get("kind")), name)
            if obj.get("kind") in ("StatefulSet", "LeaderWorkerSet")
            else 0
        )
        if over:
            raise K8sOptionError(
                f"--name {option_name!r} is {over} character(s) too long for a {obj['kind']}: its pods' "
                f"controller-revision-hash label ({name}-<hash>) would pass {LABEL_VALUE_MAX} characters "
                f"and no pod would ever be created; use at most {len(option_name) - over} characters"
            )
        for where, shown in _annotation_sets(obj):
            size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in shown.items())
            if size > ANNOTATIONS_MAX:
                raise K8sOptionError(
                    f"the annotations of {obj.get('kind')} {name}{where} add up to {size} bytes; the API "
                    f"server refuses more than {ANNOTATIONS_MAX} (256 KiB): pass fewer or shorter annotations (--annotation, --values)"
                )


def _annotation_sets(obj: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = [("", (obj.get("metadata") or {}).get("annotations") or {})]
    stack: list[tuple[str, Any]] = [("", obj.get("spec"))]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            template = node.get("template")
            if isinstance(template, dict):
                found.append(
                    (f" ({path}template)", (template.get("metadata") or {}).get("annotations") or {})
                )
            stack.extend((f"{path}{k}.", v) for k, v in node.items() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((path, v) for v in node)
    return found


def check_finite(value: Any, where: str) -> None:
    """Refuse NaN and infinities anywhere in `value` (JSON has no such numbers; YAML's .nan is one)."""
    stack: list[tuple[str, Any]] = [(where, value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            raise K8sOptionError(f"{path}: {node!r} is not a number Kubernetes accepts (finite numbers only)")
        if isinstance(node, dict):
            stack.extend((f"{path}.{k}", v) for k, v in node.items())
        elif isinstance(node, list | tuple):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(node))

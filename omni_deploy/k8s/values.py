"""Scheduling and metadata of the pods: a values file (`--values FILE`) and the options that add to it.

The file holds the fields an operator sets per cluster (namespace, nodeSelector, tolerations,
affinity, ...), spelled as in a pod spec, so a block can be pasted from another chart. Each value
is checked where omni-deploy can tell it is wrong (types, names, label syntax, toleration operators
and effects) and reported at its file:line:col; the insides of `affinity` and
`topologySpreadConstraints` are left to the API server, which checks them on apply.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from omni_deploy.common.errors import ConfigError
from omni_deploy.config.nodes import Map, Node, Origin, Scalar, Seq, to_plain
from omni_deploy.k8s.options import K8sOptionError, Scheduling, check_dns_label, check_dns_subdomain

# Label keys and annotation keys omni-deploy sets itself: a user value would break a selector, the
# config checksum or a policy skip, so they are refused rather than silently replaced.
OWN_LABEL_PREFIXES = ("app.kubernetes.io/", "omni-deploy/", "llm-d.ai/")
OWN_ANNOTATION_PREFIXES = ("checksum/", "prometheus.io/", "checkov.io/", "omni-deploy/")

_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_TOLERATION_KEYS = ("key", "operator", "value", "effect", "tolerationSeconds")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_AFFINITY_KEYS = ("nodeAffinity", "podAffinity", "podAntiAffinity")
_KEYS = (
    "namespace",
    "nodeSelector",
    "tolerations",
    "affinity",
    "topologySpreadConstraints",
    "runtimeClassName",
    "priorityClassName",
    "imagePullSecrets",
    "labels",
    "annotations",
)


@dataclass(frozen=True)
class Values:
    namespace: str | None = None
    scheduling: Scheduling = field(default_factory=Scheduling)


class _Where:
    """A node's position (or its key's) and path, for messages."""

    def __init__(self, node: Node, path: str, at: Origin | None = None) -> None:
        self.node, self.path, self.at = node, path, at or node.origin

    def fail(self, message: str) -> K8sOptionError:
        return K8sOptionError(f"{self.at.location}: {self.path}: {message}")


def check_key(key: str, what: str) -> None:
    """A label or annotation key: an optional DNS-subdomain prefix and '/', a name of 63 at most."""
    prefix, _, name = key.rpartition("/")
    if prefix:
        check_dns_subdomain(prefix, f"{what} {key!r}: prefix")
    if len(name) > 63 or not _NAME.fullmatch(name):
        raise K8sOptionError(
            f"{what} {key!r}: the name part must be 1-63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )


def check_label_value(value: str, what: str) -> None:
    if value and (len(value) > 63 or not _NAME.fullmatch(value)):
        raise K8sOptionError(
            f"{what} value {value!r}: at most 63 letters, digits, '-', '_' or '.', starting and ending "
            "with a letter or digit (or empty)"
        )


def _string(where: _Where) -> str:
    node = where.node
    if not isinstance(node, Scalar) or not isinstance(node.value, str):
        raise where.fail("expected a string")
    return node.value


def _string_map(where: _Where, check: Callable[[str, str], None]) -> dict[str, str]:
    node = where.node
    if not isinstance(node, Map):
        raise where.fail("expected a mapping of strings to strings")
    out = {}
    for key, entry in node.entries.items():
        child = _Where(entry.node, f"{where.path}.{key}")
        if not isinstance(key, str):
            raise _Where(entry.node, where.path, entry.key_origin).fail(f"key {key!r} is not a string")
        if not isinstance(entry.node, Scalar) or not isinstance(entry.node.value, str):
            raise child.fail('expected a string (quote numbers and booleans: "true", "8")')
        _checked(_Where(entry.node, child.path, entry.key_origin), check, key, entry.node.value)
        out[key] = entry.node.value
    return out


def _mapping(where: _Where, allowed: tuple[str, ...] | None = None) -> dict[str, Any]:
    node = where.node
    if not isinstance(node, Map):
        raise where.fail("expected a mapping")
    if allowed is not None:
        for key, entry in node.entries.items():
            if key not in allowed:
                raise _Where(entry.node, f"{where.path}.{key}", entry.key_origin).fail(
                    _unknown(str(key), allowed)
                )
    plain: dict[str, Any] = to_plain(node)
    return plain


def _items(where: _Where) -> list[_Where]:
    node = where.node
    if not isinstance(node, Seq):
        raise where.fail("expected a list")
    return [_Where(item, f"{where.path}[{i}]") for i, item in enumerate(node.items)]


def _unknown(key: str, allowed: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(allowed)}"
    return f"unknown key {key!r}{hint}"


def check_toleration(toleration: dict[str, Any], what: str) -> None:
    operator = toleration.get("operator", "Equal")
    effect = toleration.get("effect", "")
    if operator not in ("Equal", "Exists"):
        raise K8sOptionError(f"{what}: operator {operator!r} is neither Equal nor Exists")
    if effect not in ("", *_EFFECTS):
        raise K8sOptionError(f"{what}: effect {effect!r} is not one of {', '.join(_EFFECTS)}")
    if operator == "Exists" and toleration.get("value"):
        raise K8sOptionError(f"{what}: a toleration with operator Exists takes no value")
    if not toleration.get("key") and operator != "Exists":
        raise K8sOptionError(f"{what}: a toleration without a key must have operator Exists")
    for field_name in ("key", "value"):
        if not isinstance(toleration.get(field_name, ""), str):
            raise K8sOptionError(f"{what}: {field_name} must be a string")
    if toleration.get("key"):
        check_key(toleration["key"], f"{what}: key")
    check_label_value(toleration.get("value") or "", f"{what}:")  # the API server checks it so
    seconds = toleration.get("tolerationSeconds")
    if seconds is not None and (
        isinstance(seconds, bool) or not isinstance(seconds, int) or effect != "NoExecute"
    ):
        raise K8sOptionError(f"{what}: tolerationSeconds is a whole number, for effect NoExecute only")


def _toleration(where: _Where) -> dict[str, Any]:
    toleration = _mapping(where, _TOLERATION_KEYS)
    try:
        check_toleration(toleration, "toleration")
    except K8sOptionError as error:
        raise where.fail(str(error).removeprefix("toleration: ")) from None
    return toleration


def _pull_secret(where: _Where) -> str:
    node = where.node
    name = to_plain(node).get("name") if isinstance(node, Map) else to_plain(node)
    if isinstance(node, Map):
        _mapping(where, ("name",))
    if not isinstance(name, str):
        raise where.fail("expected a Secret name, or a mapping {name: SECRET}")
    try:
        check_dns_subdomain(name, "Secret name")
    except K8sOptionError as error:
        raise where.fail(str(error)) from None
    return name


def _checked(where: _Where, check: Any, *args: Any) -> None:
    try:
        check(*args)
    except K8sOptionError as error:
        raise where.fail(str(error)) from None


def _class_name(where: _Where, key: str) -> str:
    value = _string(where)
    _checked(where, check_dns_subdomain, value, key)
    return value


# values key -> (the Scheduling field it sets, how its value is read and checked)
_READERS: dict[str, tuple[str, Any]] = {
    "nodeSelector": ("node_selector", lambda w: _string_map(w, check_selector_entry)),
    "labels": ("labels", lambda w: _string_map(w, check_label)),
    "annotations": ("annotations", lambda w: _string_map(w, check_annotation)),
    "tolerations": ("tolerations", lambda w: tuple(_toleration(item) for item in _items(w))),
    "affinity": ("affinity", lambda w: _mapping(w, _AFFINITY_KEYS)),
    "topologySpreadConstraints": (
        "topology_spread_constraints",
        lambda w: tuple(_mapping(item) for item in _items(w)),
    ),
    "runtimeClassName": ("runtime_class", lambda w: _class_name(w, "runtimeClassName")),
    "priorityClassName": ("priority_class", lambda w: _class_name(w, "priorityClassName")),
    "imagePullSecrets": ("image_pull_secrets", lambda w: tuple(_pull_secret(item) for item in _items(w))),
}


def parse_values(root: Map) -> Values:
    fields: dict[str, Any] = {}
    namespace = None
    for key, entry in root.entries.items():
        where = _Where(entry.node, str(key))
        if key not in _KEYS:
            raise _Where(entry.node, str(key), entry.key_origin).fail(_unknown(str(key), _KEYS))
        if key == "namespace":
            namespace = _string(where)
            _checked(where, check_dns_label, namespace, "namespace")
        else:
            name, read = _READERS[str(key)]
            fields[name] = read(where)
    from omni_deploy.k8s.limits import check_finite

    for name, value in fields.items():
        check_finite(value, f"--values: {name}")
    return Values(namespace, Scheduling(**fields))


def load_values(path: Path) -> Values:
    """The values file, or a K8sOptionError that says where it is wrong (a usage error, exit 2)."""
    from omni_deploy.config.safe_read import read_text
    from omni_deploy.config.yaml_loader import display_path, parse_text

    name = display_path(path)
    try:
        root = parse_text(read_text(path, name), name)
    except ConfigError as error:
        if error.code == "E104":  # the loader's words are for deploy files
            raise K8sOptionError(
                f"--values: {error.location}: the top level of a values file must be a mapping"
            ) from None
        raise K8sOptionError(f"--values: {error}") from None
    return parse_values(root)


def parse_pair(text: str, what: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise K8sOptionError(f"{what} {text!r}: expected KEY=VALUE")
    return key, value


def parse_toleration(text: str) -> dict[str, Any]:
    """`KEY[=VALUE][:EFFECT]`, as `kubectl taint` writes a taint: Equal with a value, else Exists."""
    rest, _, effect = text.rpartition(":") if ":" in text.split("/")[-1] else (text, "", "")
    key, sep, value = rest.partition("=")
    toleration: dict[str, Any] = {"key": key, "operator": "Equal" if sep else "Exists"}
    if sep:
        toleration["value"] = value
    if effect:
        toleration["effect"] = effect
    check_toleration(toleration, f"--toleration {text!r}")
    return toleration


def check_selector_entry(key: str, value: str) -> None:
    check_key(key, "nodeSelector key")
    check_label_value(value, f"nodeSelector {key}")


def check_label(key: str, value: str) -> None:
    check_key(key, "label")
    check_label_value(value, f"label {key}")
    if key.startswith(OWN_LABEL_PREFIXES):
        raise K8sOptionError(f"label {key!r}: omni-deploy sets the {key.split('/')[0]}/ labels itself")


def check_annotation(key: str, value: str) -> None:
    check_key(key, "annotation")
    if key.startswith(OWN_ANNOTATION_PREFIXES):
        raise K8sOptionError(
            f"annotation {key!r}: omni-deploy sets the {key.split('/')[0]}/ annotations itself"
        )


def check_metadata(scheduling: Scheduling) -> None:
    for key, value in scheduling.node_selector.items():
        check_selector_entry(key, value)
    for key, value in scheduling.labels.items():
        check_label(key, value)
    for key, value in scheduling.annotations.items():
        check_annotation(key, value)
    for secret in scheduling.image_pull_secrets:
        check_dns_subdomain(secret, "image pull Secret")
    for class_name, what in (
        (scheduling.runtime_class, "runtime class"),
        (scheduling.priority_class, "priority class"),
    ):
        if class_name is not None:
            check_dns_subdomain(class_name, what)


def merged(values: Values, cli: Scheduling, namespace: str | None) -> tuple[str | None, Scheduling]:
    """The options on top of the file: their names and mappings win, their lists are added."""
    base = values.scheduling
    scheduling = replace(
        base,
        node_selector={**base.node_selector, **cli.node_selector},
        tolerations=base.tolerations + cli.tolerations,
        runtime_class=cli.runtime_class or base.runtime_class,
        priority_class=cli.priority_class or base.priority_class,
        image_pull_secrets=tuple(dict.fromkeys(base.image_pull_secrets + cli.image_pull_secrets)),
        labels={**base.labels, **cli.labels},
        annotations={**base.annotations, **cli.annotations},
    )
    check_metadata(scheduling)
    return namespace or values.namespace, scheduling

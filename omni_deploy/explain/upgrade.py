"""What a server would see differently for the same deploy file after a vllm-omni upgrade.

`diff --target-version OLD..NEW FILE` loads FILE twice, once per release, each time with the bases
vllm-omni bundles read from that release's own deploy folder (the same base file name can carry
other values: 0.32.0rc1's minicpmo_4_5.yaml raises max_num_seqs 4 -> 16), and reports:

- config: every effective value that differs between the two loads, with where each came from;
- defaults: keys the file leaves unset whose default the two releases' code differ on, or that
  only one release reads (from each release's committed knowledge, upstream_keys.json, file:line);
- findings: validate's findings (static tier) that only one of the two releases gives: values
  newly refused, keys no longer read or newly read;
- behaviour: what each release's own Code2Wav does with the file (speaker_backend/release_own.py:
  TF32, reference prefetch, CAM++'s device, the ONNX Runtime session) where it differs.

Pure but for loading: the caller passes the two Deployments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from omni_deploy.config.diff import Change, diff_configs
from omni_deploy.config.nodes import Map
from omni_deploy.deployment.model import Deployment
from omni_deploy.knowledge.target import KeyRead, TargetReads, release_reads

# Places whose unset keys a server of this file meets (the others need a section the file has).
_ALWAYS = ("top", "stage")


@dataclass(frozen=True)
class DefaultChange:
    place: str
    key: str
    old: KeyRead | None  # None: the old release does not read it
    new: KeyRead | None

    def as_dict(self) -> dict[str, Any]:
        return {"place": self.place, "key": self.key, "old": _read(self.old), "new": _read(self.new)}

    def line(self, old: str, new: str) -> str:
        return f"{self.place}.{self.key}: {_said(self.old, old)} -> {_said(self.new, new)}"


def _read(read: KeyRead | None) -> dict[str, Any] | None:
    if read is None:
        return None
    default = read.default if read.has_default else None
    return {"default": default, "has_default": read.has_default, "default_code": read.default_code,
            "at": list(read.at)}  # fmt: skip


def _said(read: KeyRead | None, version: str) -> str:
    if read is None:
        return f"not read by {version}"
    if read.has_default:
        value = repr(read.default)
    elif read.default_code:
        value = f"`{read.default_code}`"
    else:
        value = "no default"
    return f"{value} ({read.at[0] if read.at else version})"


@dataclass(frozen=True)
class BehaviourChange:
    platform: str
    topic: str
    old: dict[str, Any] | None
    new: dict[str, Any] | None

    def as_dict(self) -> dict[str, Any]:
        return {"platform": self.platform, "topic": self.topic, "old": self.old, "new": self.new}


@dataclass
class UpgradeDiff:
    old: str
    new: str
    platform: str | None
    config: list[Change] = field(default_factory=list)
    defaults: list[DefaultChange] = field(default_factory=list)
    refused: list[Any] = field(default_factory=list)  # validate's findings only NEW gives
    cleared: list[Any] = field(default_factory=list)  # validate's findings only OLD gives
    behaviour: list[BehaviourChange] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not (self.config or self.defaults or self.refused or self.cleared or self.behaviour)


def _sets(deployment: Deployment, place: str, key: str) -> bool:
    """Whether the file sets `key` where `place` reads it (a stage key: in any stage)."""
    config = deployment.config
    if place == "top":
        return key in config
    if place == "stage":
        return any(key in s or key in _engine_args(s) for s in deployment.stages())
    if place == "code2wav":
        extra = deployment.code2wav_extra()
        return extra is not None and key in extra
    if place == "duplex_session":
        node = config.get("duplex_session")
        return isinstance(node, Map) and key in node
    return True


def _engine_args(stage: Map) -> Map:
    node = stage.get("engine_args")
    return node if isinstance(node, Map) else Map({})


def _places(deployment: Deployment) -> tuple[str, ...]:
    places = list(_ALWAYS)
    if deployment.pipeline.is_minicpmo:
        places.append("code2wav")
    if isinstance(deployment.config.get("duplex_session"), Map):
        places.append("duplex_session")
    return tuple(places)


def _default_of(read: KeyRead | None) -> tuple[bool, Any, str | None]:
    return (False, None, None) if read is None else (read.has_default, read.default, read.default_code)


def default_changes(deployment: Deployment, old: TargetReads, new: TargetReads) -> list[DefaultChange]:
    """Keys the file leaves unset that the two releases treat differently: another default, or
    read by one release only (with a default there: the server meets it)."""
    out = []
    for place in _places(deployment):
        old_keys, new_keys = old.keys(place), new.keys(place)
        for key in sorted(set(old_keys) | set(new_keys)):
            if _sets(deployment, place, key):
                continue
            a, b = old_keys.get(key), new_keys.get(key)
            if a is not None and b is not None:
                if _default_of(a) != _default_of(b):
                    out.append(DefaultChange(place, key, a, b))
            elif _meets(a or b):  # read by one release only: unset, its default is what the server meets
                out.append(DefaultChange(place, key, a, b))
    return out


def _meets(read: KeyRead | None) -> bool:
    """A key one release alone reads, with a default that does something (None: the feature is off
    or unset there, as it is where the key is not read)."""
    return read is not None and (
        read.default_code is not None or (read.has_default and read.default is not None)
    )


_VERSION = re.compile(r"\b\d+\.\d+\.\d+(?:rc\d+)?\b")


def _key(finding: Any) -> tuple[str, str, str, str]:
    """A finding as both releases would give it: its code, place and message with versions masked."""
    from pathlib import PurePath

    message = _VERSION.sub("V", finding.message)
    return finding.code, PurePath(finding.file).name, finding.path, message


def finding_changes(old_findings: list[Any], new_findings: list[Any]) -> tuple[list[Any], list[Any]]:
    """(findings only NEW gives, findings only OLD gives); infos left out (they say nothing refused)."""
    a = {_key(f): f for f in old_findings if f.severity != "info"}
    b = {_key(f): f for f in new_findings if f.severity != "info"}
    return [f for k, f in b.items() if k not in a], [f for k, f in a.items() if k not in b]


def behaviour_changes(old_own: dict[str, list[Any]], new_own: dict[str, list[Any]]) -> list[BehaviourChange]:
    """Per platform and topic, where the two releases' own Code2Wav differ in value or sentence."""
    out = []
    for platform in dict.fromkeys([*old_own, *new_own]):
        a = {b.topic: b.as_dict() for b in old_own.get(platform, [])}
        b = {x.topic: x.as_dict() for x in new_own.get(platform, [])}
        for topic in dict.fromkeys([*a, *b]):
            left, right = a.get(topic), b.get(topic)
            if _masked(left) != _masked(right):
                out.append(BehaviourChange(platform, topic, left, right))
    return out


def _masked(entry: dict[str, Any] | None) -> Any:
    if entry is None:
        return None
    return {k: _VERSION.sub("V", v) if isinstance(v, str) else v for k, v in entry.items() if k != "at"}


def upgrade_diff(
    old_deployment: Deployment,
    new_deployment: Deployment,
    old: str,
    new: str,
    platform: str | None,
    env: dict[str, str],
    old_findings: list[Any],
    new_findings: list[Any],
) -> UpgradeDiff:
    """What changes for a server of this file when vllm-omni `old` is replaced by `new`;
    `old_findings`/`new_findings`: validate's findings on each load at its release (the caller
    validates: explain does not import validate)."""
    from omni_deploy.speaker_backend import code2wav_own, speaker_inputs

    configs = [d.on(platform).config if platform else d.config for d in (old_deployment, new_deployment)]
    result = UpgradeDiff(old, new, platform, config=diff_configs(*configs))
    old_reads, new_reads = release_reads(old), release_reads(new)
    result.defaults = default_changes(new_deployment, old_reads, new_reads)
    platforms = (platform,) if platform else None
    result.refused, result.cleared = finding_changes(old_findings, new_findings)
    own: list[dict[str, list[Any]]] = []
    for deployment, reads in ((old_deployment, old_reads), (new_deployment, new_reads)):
        per: dict[str, list[Any]] = {}
        if deployment.pipeline.is_minicpmo:
            for p in platforms or deployment.default_platforms():
                inputs = speaker_inputs(deployment, p)
                environ = {**env, **{n: v.value for n, v in inputs.in_file.items()}}
                per[p] = code2wav_own(reads, p, inputs.extra, inputs.extra_path, environ)
        own.append(per)
    result.behaviour = behaviour_changes(own[0], own[1])
    return result

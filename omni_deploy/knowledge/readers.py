"""Who reads a key at one place of a deploy file, for one target vllm-omni: the join of the
hand-written table (`keys.py`) and what the target's code reads (`target.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from omni_deploy.knowledge.keys import ALL, ELSEWHERE, PLUGIN, UNREAD, VLLM, Key
from omni_deploy.knowledge.target import KeyRead, TargetReads, describe_versions, versions_reading
from omni_deploy.knowledge.versions import order

READ, LEGACY, REFUSED, BY_PLUGIN, ENGINE_ARGUMENT, NOT_READ, UNKNOWN = (
    "read", "legacy", "refused", "plugin", "engine_argument", "not_read", "unknown",
)  # fmt: skip

# Where the generated data holds the reads of a place of the hand table.
_DATA_PLACES = {
    "platform_stage": ("platform_stage",),
    # Code2Wav reads its options from the connector's extra, which the transport reads too.
    "code2wav": ("code2wav", "connector_extra"),
}
# Where the hand table describes a place of the data.
_TABLE_PLACE = {"platform_stage": "stage"}


@dataclass(frozen=True)
class Status:
    kind: str
    message: str = ""
    key: Key | None = None
    read: KeyRead | None = None


@cache
def table(place: str) -> dict[str, Key]:
    """The hand-written keys of a place (a platform stage entry uses the stage table; the Code2Wav
    extra also holds the connector transport's keys)."""
    places = ("code2wav", "connector_extra") if place == "code2wav" else (_TABLE_PLACE.get(place, place),)
    return {k.name: k for k in ALL if k.place in places}


def _where(target: TargetReads) -> str:
    return f"vllm-omni {target.version}" + ("" if target.exact else f" (checked against {target.basis})")


def status(place: str, name: str, target: TargetReads) -> Status:
    key = table(place).get(name)
    for data_place in _DATA_PLACES.get(place, (place,)):
        read = target.reads(data_place, name)
        if read is None:
            continue
        if read.refused:
            why = key.error_if_present if key and key.error_if_present else "vllm-omni refuses the file"
            return Status(REFUSED, f"{why} ({target.source} checks it at {read.at[0]})", key, read)
        return Status(READ, "", key, read)
    if place == "top" and name == "stage_args" and target.legacy_stage_args:
        message = (
            f"{_where(target)} loads a stage_args file with its legacy loader ({target.legacy_stage_args})"
        )
        return Status(LEGACY, message, key)
    other = _read_by_others(place, name, key, target)
    return other if other is not None else _not_read(place, name, key, target)


def _read_by_others(place: str, name: str, key: Key | None, target: TargetReads) -> Status | None:
    """A key another program reads whatever the target: vLLM, the diffusion engine, the plugin."""
    if key is not None and key.reader == ELSEWHERE:
        return Status(READ, "", key)
    if place in ("stage", "platform_stage") and target.reads("diffusion_engine", name) is not None:
        # Passed on through engine_extras to OmniDiffusionConfig.from_kwargs, which takes it.
        return Status(ENGINE_ARGUMENT, "", key, target.reads("diffusion_engine", name))
    if key is not None and key.reader == VLLM:
        return Status(ENGINE_ARGUMENT, "", key)
    if key is not None and key.reader == PLUGIN:
        return Status(
            BY_PLUGIN,
            f"'{name}' is read by omni-deploy's vLLM plugin; {_where(target)} does not read it",
            key,
        )
    return None


def _not_read(place: str, name: str, key: Key | None, target: TargetReads) -> Status:
    """A key the target does not read: read by other versions, known to nobody's code, or unknown."""
    versions = sorted(
        {v for p in _DATA_PLACES.get(place, (place,)) for v in versions_reading(p, name)}, key=order
    )
    unread = UNREAD.get((place, name))
    if versions or key is not None or unread:
        if versions:
            said = f"'{name}' is read by vllm-omni {describe_versions(versions)} only"
        elif unread:
            said = f"'{name}': {unread}"
        else:
            said = f"'{name}' is read by no vllm-omni release"
        return Status(NOT_READ, f"{said}; {_where(target)} ignores it", key)
    return Status(UNKNOWN, "", None)


def known_names(place: str, target: TargetReads) -> set[str]:
    """Names a typo at `place` is compared with: what the target reads there, and the keys other
    readers (vLLM, the plugin) take there."""
    names = {n for p in _DATA_PLACES.get(place, (place,)) for n in target.keys(p)}
    names |= {n for n, k in table(place).items() if k.reader in (VLLM, PLUGIN, ELSEWHERE)}
    return names

"""Turn what vllm-omni's own start-up code raised into findings at the file:line of the value it names.

Upstream's messages name fields, not lines: "Stage 1 (llm_ar) has explicit engine argument(s)
with no structured config owner: enable_lora", "DuplexSessionRuntimeConfig.__init__() got an
unexpected keyword argument 'warmup_frames'", "Undefined connector reference: shm2". The names
are looked up in the merged file through its provenance: keys first (inside stage N when the
message names a stage, on the platform the check ran for), then values; a message that names
nothing found in the file is reported about the whole file.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterator
from dataclasses import dataclass

from omni_deploy.common import jsonpath
from omni_deploy.config.nodes import Map, Origin, Scalar, Seq
from omni_deploy.validate.server_check.run import Refusal

_STAGE = re.compile(r"\b[Ss]tage[ _-]?(\d+)\b")
_OWNERLESS = re.compile(r"no structured config owner: (.+)$")
_QUOTED = re.compile(r"""['"]([^'"\s]{1,200})['"]""")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_STATED = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*) \(([^()\s]{1,40})\)")
# pydantic's ValidationError: the field's name on a line, its error below with the value it got
# ("gpu_memory_utilization\n  Input should be ... [type=..., input_value=1.5, input_type=float]").
_PYDANTIC_INPUT = re.compile(
    r"(?m)^([A-Za-z_][A-Za-z0-9_.]*)[ \t]*\n[ \t]+[^\n]*?\[type=[^,\]\n]+, input_value=([^\n]{1,200}?), input_type="
)
_MAX_PLACES = 6  # more matches than this say nothing about where: the whole file instead


@dataclass(frozen=True)
class Place:
    origin: Origin
    path: str
    is_key: bool
    stage_id: object  # the stage_id of the stage entry it lies in, or None
    platform: str | None  # the platform section it lies in, or None


def _stage_id(node: Map) -> object:
    sid = node.get("stage_id")
    return sid.value if isinstance(sid, Scalar) else None


def _walk(
    node: object, parts: list[Hashable], stage_id: object, platform: str | None
) -> Iterator[tuple[list[Hashable], object, Origin, bool, object, str | None]]:
    """(path parts, key or value, origin, is_key, stage_id, platform) for every key and scalar."""
    if isinstance(node, Map):
        for key, entry in node.entries.items():
            here = [*parts, key]
            inner_platform = platform
            if len(parts) == 1 and parts[0] == "platforms":
                inner_platform = str(key)
            yield here, key, entry.key_origin, True, stage_id, inner_platform
            yield from _walk(entry.node, here, stage_id, inner_platform)
    elif isinstance(node, Seq):
        for index, item in enumerate(node.items):
            inner = _stage_id(item) if isinstance(item, Map) and parts[-1:] == ["stages"] else stage_id
            yield from _walk(item, [*parts, index], inner, platform)
    elif isinstance(node, Scalar) and isinstance(node.value, str):
        yield parts, node.value, node.origin, False, stage_id, platform


def _path(parts: list[Hashable], config: Map) -> str:
    """A JSONPath that names stages by stage_id (merged positions are not what the user wrote)."""
    out = jsonpath.ROOT
    node: object = config
    for part in parts:
        if isinstance(node, Seq) and isinstance(part, int):
            item = node.items[part]
            sid = _stage_id(item) if isinstance(item, Map) else None
            out = jsonpath.stage(sid, out) if sid is not None else jsonpath.child(out, part)
            node = item
        else:
            out = jsonpath.child(out, part)
            node = node.get(part) if isinstance(node, Map) else None
    return out


# Messages that name a setting in words rather than by its key.
_PHRASES = {
    "Model Runner V2": "model_runner",
    "async_chunk=True": "async_chunk",
    "Native AR-to-DiT KV transfer": "kv_transfer_config",  # config/omni_config.py:339-340
}


# A stage's device layout (engine/stage_init_utils.py `_check_stage_device_layout` and the replica
# split `split_devices_for_replicas`): the message names the sizes in words ("tp=2 * dp=1"), and
# every one of these keys the stage sets makes the layout.
LAYOUT_KEYS = (
    "devices",
    "num_replicas",
    "tensor_parallel_size",
    "data_parallel_size",
    "data_parallel_size_local",
    "pipeline_parallel_size",
)
_LAYOUT_PHRASES = ("device layout is inconsistent", "(per-replica template)", "template-mode device")


def _named_part(message: str) -> str:
    """The part of a message that names settings: vLLM's SchedulerConfig is built with every
    scheduler argument, and pydantic's "[type=..., input_value=ArgsKwargs(...)]" dumps them all (a
    typed-config model's dump, a few keys, does name the one at fault: kept)."""
    return message.split(" [type=", 1)[0] if "for SchedulerConfig" in message else message


def _names(refusal: Refusal) -> list[str]:
    message = _named_part(refusal.message)
    if any(phrase in message for phrase in _LAYOUT_PHRASES):
        return list(LAYOUT_KEYS)
    named = [key for phrase, key in _PHRASES.items() if phrase in message]
    if named:
        return named
    owned = _OWNERLESS.search(message)
    if owned:
        return [n.strip() for n in owned.group(1).split(",") if n.strip()]
    quoted = _QUOTED.findall(message)
    tail = message.rsplit(": ", 1)[-1].strip() if ": " in message else ""
    words = [w for w in _WORD.findall(message) if "_" in w or w in quoted]
    # "Undefined connector reference: shm2": the name after the last colon, though plain
    return list(dict.fromkeys([*quoted, *words, *([tail] if _WORD.fullmatch(tail) else [])]))


def _at(config: Map, parts: list[Hashable]) -> object:
    node: object = config
    for part in parts:
        if isinstance(node, Map):
            node = node.get(part)
        elif isinstance(node, Seq) and isinstance(part, int):
            node = node.items[part]
        else:
            return None
    return node


def _null_extras(config: Map) -> list[Place]:
    """Connectors whose `extra:` is null: what a TypeError about None in the connector set-up
    (dict(None)) comes from."""
    found = []
    for parts, _, origin, is_key, sid, platform in _walk(config, [], None, None):
        if not is_key or platform is not None or parts[-1:] != ["extra"]:
            continue
        inside = [str(p) for p in parts[:-2]]
        if inside[-1:] not in (["connectors"], ["input_connectors"], ["output_connectors"]):
            continue
        value = _at(config, parts)
        if isinstance(value, Scalar) and value.value is None:
            found.append(Place(origin, _path(parts, config), True, sid, None))
    return found


def _lacking(config: Map, key: str) -> list[Place]:
    """Connectors (named, under runtime, or inline in a stage's wiring) that lack `key`: what a
    KeyError in the connector set-up names."""
    found = []
    for parts, _, origin, is_key, sid, platform in _walk(config, [], None, None):
        if not is_key or platform is not None:
            continue
        inside = [str(p) for p in parts[:-1]]
        named = inside[-1:] == ["connectors"]
        inline = inside[-1:] in (["input_connectors"], ["output_connectors"])
        if not (named or inline):
            continue
        node = _at(config, parts)
        if isinstance(node, Map) and key not in node:
            found.append(Place(origin, _path(parts, config), True, sid, None))
    return found


# Mappings whose keys are settings a start-up message can name (after a leading platforms.<name>):
# the top level, a stage entry and its engine mappings and wiring, a connector and its extra,
# duplex_session. A key deeper than these (default_sampling_params.seed, hf_overrides.x) is
# never what "field(s) 'seed'" names: a word alone does not place a refusal.
_SETTING_HOLDERS = (
    (),
    ("stages", int),
    ("stages", int, "engine_args"),
    ("stages", int, "engine_extras"),
    ("stages", int, "runtime"),
    ("stages", int, "parallel_config"),
    ("stages", int, "input_connectors"),
    ("stages", int, "output_connectors"),
    ("connectors", str),
    ("connectors", str, "extra"),
    ("runtime", "connectors", str),
    ("runtime", "connectors", str, "extra"),
    ("duplex_session",),
)


def _holds_settings(container: list[Hashable], head: str | None = None) -> bool:
    """Whether a key inside `container` (path parts) is a setting a message names by its key path;
    with `head` (a dotted name's first part), the container must end in that key."""
    parts = container[2:] if container[:1] == ["platforms"] and len(container) >= 2 else container
    if head is not None:
        if not parts or str(parts[-1]) != head:
            return False
        parts = parts[:-1]
    for shape in _SETTING_HOLDERS:
        if len(shape) == len(parts) and all(
            (isinstance(want, type) and isinstance(got, want) and not isinstance(got, bool))
            or (not isinstance(want, type) and got == want)
            for want, got in zip(shape, parts, strict=True)
        ):
            return True
    return False


def _named(name: str, parts: list[Hashable], text: object, is_key: bool) -> bool:
    """Whether the key (or value) at `parts` is what `name` names, by its key path: the key (or the
    key holding the value) sits where a setting of that name lives, and a dotted name's head is
    the key right above it. A word that merely equals a deeper key never matches."""
    head, _, tail = name.partition(".")
    if str(text) != (tail or head) or "." in tail:
        return False
    key_parts = list(parts)  # a key's path, or the path of the key that holds a value
    while not is_key and key_parts and isinstance(key_parts[-1], int):
        key_parts.pop()  # an item of a list value: the key holding the list
    return _holds_settings(key_parts[:-1], head if tail else None)


def _unquoted(value: str) -> str:
    """A value as pydantic's repr shows it ('abc', "abc", 1.5), as str() of the scalar reads."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _holds(config: Map, parts: list[Hashable], stated: str) -> bool:
    value = _at(config, parts)
    return isinstance(value, Scalar) and str(value.value) == stated


def named_places(
    config: Map, names: list[str], stage: int | None, platform: str, stated: dict[str, str] | None = None
) -> list[Place]:
    """Where the settings `names` are written in the merged file: inside stage `stage` (None: any),
    outside every platform section but `platform`'s; a key in `stated` only where it holds that
    value. Static checks that report what the server check would call this too, so both point at
    the same lines."""
    stated = stated or {}
    return [
        Place(origin, _path(parts, config), is_key, sid, where)
        for name in names
        for parts, text, origin, is_key, sid, where in _walk(config, [], None, None)
        if _named(name, parts, text, is_key)
        and (stage is None or sid == stage)
        and (where is None or where == platform)
        and origin.layer != "default"
        and (not is_key or name not in stated or _holds(config, parts, stated[name]))
    ]


def places(refusal: Refusal, config: Map) -> list[Place]:
    """Where in the merged file `config` the values `refusal` names were written (empty: nowhere)."""
    if refusal.step == "transfer_config" and refusal.type == "KeyError":
        lacking = _lacking(config, refusal.message)
        if lacking:
            return lacking[:_MAX_PLACES]
    if refusal.step == "transfer_config" and refusal.type == "TypeError" and "NoneType" in refusal.message:
        nulls = _null_extras(config)
        if nulls:
            return nulls[:_MAX_PLACES]
    match = _STAGE.search(refusal.message)
    wanted_stage = int(match.group(1)) if match else None
    # "max_num_batched_tokens (2) must be >= max_num_seqs (8)": a key stated with its value is the
    # key that holds that value (not every stage's max_num_seqs).
    stated = dict(_STATED.findall(_named_part(refusal.message)))
    # A pydantic refusal names the value it got: only the stage whose key holds it is at fault.
    stated.update(
        (name.rsplit(".", 1)[-1], _unquoted(value))
        for name, value in _PYDANTIC_INPUT.findall(refusal.message)
    )
    names = _names(refusal)
    # No key holds the stated value (a value shortened in the message): every candidate.
    found = named_places(config, names, wanted_stage, refusal.platform, stated) or named_places(
        config, names, wanted_stage, refusal.platform
    )
    if refusal.message.startswith("Undefined connector reference"):
        # The reference is the fault, not the connector of that name elsewhere.
        found = [p for p in found if not p.is_key and "_connectors" in p.path]
    return _chosen(found)


def _chosen(found: list[Place]) -> list[Place]:
    """The keys among `found` (else the values), once each; none when too many to say where."""
    keys = [p for p in found if p.is_key]
    chosen = keys or found
    unique = list({(p.origin.file, p.origin.line, p.path): p for p in chosen}.values())
    return unique if len(unique) <= _MAX_PLACES else []


def layout_places(config: Map, stage: int, platform: str) -> list[Place]:
    """Where a refusal of stage `stage`'s device layout on `platform` is reported (the server
    check's and the static check's findings point at the same keys)."""
    return _chosen(named_places(config, list(LAYOUT_KEYS), stage, platform))

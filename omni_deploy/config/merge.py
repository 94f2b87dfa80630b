"""vllm-omni's deploy merge rules (`resolve_deploy_yaml`; 0.30.0's, and what later releases add), on
positioned nodes.

- top level: overlay replaces base key by key, shallowly (a mapping is replaced whole), except the
  keys of `_DEPLOY_DEEP_MERGE_KEYS` (0.31 on: speech_cache), merged recursively;
- `connectors`: recursive merge of mappings;
- `stages`: matched by stage_id, base order kept, new stages appended; inside a stage only the
  five DEEP_MERGE_KEYS are merged recursively, every other key is replaced whole;
- `platforms`: per platform name, platform keys replaced shallowly, `stages` merged as above;
- an explicit null is a value like any other and overrides.

Each function also reports what a replace threw away (`Dropped`), so the validator can warn when
an overlay replaced a base mapping whole and thereby lost some of its keys.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from omni_deploy.common import codes, jsonpath
from omni_deploy.common.errors import ConfigError
from omni_deploy.config.nodes import Entry, Map, Node, Origin, Scalar, Seq, is_falsy, to_plain
from omni_deploy.config.stage_schema import DEPLOY_DEEP_MERGE_KEYS

DEEP_MERGE_KEYS = frozenset(
    {
        "default_sampling_params",
        "default_pooling_params",
        "subtalker_sampling_params",
        "engine_extras",
        "engine_args",
    }
)
STRUCTURED_KEYS = ("connectors", "stages", "platforms")


@dataclass(frozen=True)
class Dropped:
    """An overlay mapping replaced a base mapping whole; `lost` are the base keys that vanished,
    nested ones dotted from the replaced mapping (`to_stage_2.extra.codec_chunk_frames`: the
    overlay kept `to_stage_2` but not that key inside it), each with where the base wrote it."""

    path: str
    key_origin: Origin
    base_origin: Origin
    lost: tuple[str, ...]
    lost_origins: tuple[Origin, ...] = ()
    effective: Node | None = None  # the overlay's mapping: what the path holds after the merge


@dataclass
class MergeReport:
    dropped: list[Dropped] = field(default_factory=list)


def _empty(origin: Origin) -> Map:
    return Map({}, origin)


def _as_map(node: Node | None, what: str, origin: Origin) -> Map:
    if node is None or (isinstance(node, Scalar) and not node.value):
        # Upstream writes `x or {}`: null, false, 0 and "" all read as an empty mapping.
        return _empty(node.origin if node is not None else origin)
    if not isinstance(node, Map):
        raise ConfigError(f"{what} must be a mapping", node.origin.location, code=codes.E120)
    return node


def _note_replace(report: MergeReport | None, path: str, old: Node | None, new: Entry) -> None:
    if report is None or not isinstance(old, Map) or not isinstance(new.node, Map):
        return
    lost = _lost_keys(old, new.node, "")
    if lost:
        names = tuple(name for name, _ in lost)
        report.dropped.append(
            Dropped(path, new.key_origin, old.origin, names, tuple(o for _, o in lost), new.node)
        )


def _lost_keys(old: Map, new: Map, prefix: str) -> list[tuple[str, Origin]]:
    """Base keys missing from a whole replacement, also inside the mappings both sides have:
    a replace keeps nothing of the base, however deep."""
    lost: list[tuple[str, Origin]] = []
    for key, entry in old.entries.items():
        name = f"{prefix}{key}"
        kept = new.get(key)
        if key not in new.entries:
            lost.append((name, entry.key_origin))
        elif isinstance(entry.node, Map) and isinstance(kept, Map):
            lost.extend(_lost_keys(entry.node, kept, f"{name}."))
    return lost


def merge_one_level(base: Map, update: Map) -> Map:
    """Upstream `{**base, **update}`: update's keys replace base's, each value whole."""
    merged = base.copy()
    merged.entries.update(update.entries)
    return merged


def merge_recursive(base: Map, update: Map) -> Map:
    """Upstream `_get_recursively_merged_dict`: mappings merge, anything else replaces."""
    merged = base.copy()
    for key, entry in update.entries.items():
        old = merged.get(key)
        if isinstance(old, Map) and isinstance(entry.node, Map):
            merged.entries[key] = Entry(entry.key_origin, merge_recursive(old, entry.node))
        else:
            merged.entries[key] = entry
    merged.origin = update.origin
    return merged


def _stage_id(stage: Node, where: str) -> Hashable:
    if not isinstance(stage, Map):
        raise ConfigError(f"each entry of {where} must be a mapping", stage.origin.location, code=codes.E121)
    sid = stage.get("stage_id")
    if sid is None:
        raise ConfigError(f"an entry of {where} has no stage_id", stage.origin.location, code=codes.E122)
    value = to_plain(sid)
    if isinstance(value, (dict, list)):
        raise ConfigError("stage_id must be an integer", sid.origin.location, code=codes.E123)
    return value


def merge_stage(base: Map, overlay: Map, path: str, report: MergeReport | None = None) -> Map:
    """Upstream `_deep_merge_stage`: `{**base, **overlay, **deep-merged DEEP_MERGE_KEYS}`."""
    merged = base.copy()
    for key, entry in overlay.entries.items():
        if key not in DEEP_MERGE_KEYS:
            _note_replace(report, jsonpath.child(path, key), base.get(key), entry)
        merged.entries[key] = entry
    deep_base = Map({k: e for k, e in base.entries.items() if k in DEEP_MERGE_KEYS})
    deep_overlay = Map({k: e for k, e in overlay.entries.items() if k in DEEP_MERGE_KEYS})
    for key, entry in merge_recursive(deep_base, deep_overlay).entries.items():
        merged.entries[key] = entry
    merged.origin = overlay.origin
    return merged


def merge_stage_lists(
    base: Node | None, overlay: Node | None, path: str, origin: Origin, report: MergeReport | None
) -> Seq:
    """Upstream `_merge_stage_lists`: by stage_id, base order kept, overlay-only stages appended."""
    by_id: dict[Hashable, Node] = {}
    for name, seq in (("base", base), ("overlay", overlay)):
        if seq is None or (isinstance(seq, Scalar) and not seq.value):
            continue
        if not isinstance(seq, Seq):
            raise ConfigError(f"{path} must be a list", seq.origin.location, code=codes.E124)
        for stage in seq.items:
            sid = _stage_id(stage, path)
            if name == "overlay" and sid in by_id:
                old = by_id[sid]
                assert isinstance(old, Map) and isinstance(stage, Map)
                by_id[sid] = merge_stage(old, stage, jsonpath.stage(sid, path), report)
            else:
                by_id[sid] = stage
    seq_origin = overlay.origin if overlay is not None else base.origin if base is not None else origin
    return Seq(list(by_id.values()), seq_origin)


def merge_platforms(base: Node | None, overlay: Node | None, report: MergeReport | None) -> Map | None:
    if is_falsy(base) and is_falsy(overlay):
        return None
    origin = (overlay or base).origin  # type: ignore[union-attr]
    base_map = _as_map(base, "platforms", origin)
    overlay_map = _as_map(overlay, "platforms", origin)
    merged = Map({}, overlay_map.origin if overlay is not None else base_map.origin)
    for plat in [*base_map.entries, *(k for k in overlay_map.entries if k not in base_map.entries)]:
        where = f"platforms.{plat}"
        bp = _as_map(base_map.get(plat), where, origin)
        op = _as_map(overlay_map.get(plat), where, origin)
        plat_map = bp.copy()
        for key, entry in op.entries.items():
            if key != "stages":
                _note_replace(report, jsonpath.join(("platforms", plat, key)), bp.get(key), entry)
                plat_map.entries[key] = entry
        stages = merge_stage_lists(
            bp.get("stages"),
            op.get("stages"),
            jsonpath.join(("platforms", plat, "stages")),
            op.origin,
            report,
        )
        key_entry = op.entries.get("stages") or bp.entries.get("stages")
        plat_map.set("stages", stages, key_entry.key_origin if key_entry else stages.origin)
        plat_entry = overlay_map.entries.get(plat) or base_map.entries[plat]
        plat_map.origin = plat_entry.node.origin
        merged.entries[plat] = Entry(plat_entry.key_origin, plat_map)
    return merged


def merge_connectors(base: Node | None, overlay: Node | None) -> Map | None:
    if is_falsy(base) and is_falsy(overlay):
        return None
    origin = (overlay or base).origin  # type: ignore[union-attr]
    return merge_recursive(_as_map(base, "connectors", origin), _as_map(overlay, "connectors", origin))


def merge_documents(base: Map, overlay: Map, report: MergeReport | None = None) -> Map:
    """Merge an overlay document (base_config already popped) onto its resolved base."""
    merged = base.copy()
    for key, entry in overlay.entries.items():
        if key in STRUCTURED_KEYS:
            continue
        old = base.get(key)
        if key in DEPLOY_DEEP_MERGE_KEYS and isinstance(old, Map) and isinstance(entry.node, Map):
            merged.entries[key] = Entry(entry.key_origin, merge_recursive(old, entry.node))
            continue
        _note_replace(report, jsonpath.child(jsonpath.ROOT, key), old, entry)
        merged.entries[key] = entry
    connectors = merge_connectors(base.get("connectors"), overlay.get("connectors"))
    if connectors is not None:
        entry = overlay.entries.get("connectors") or base.entries["connectors"]
        merged.set("connectors", connectors, entry.key_origin)
    stages_entry = overlay.entries.get("stages") or base.entries.get("stages")
    stages = merge_stage_lists(base.get("stages"), overlay.get("stages"), "$.stages", overlay.origin, report)
    merged.set("stages", stages, stages_entry.key_origin if stages_entry else stages.origin)
    platforms = merge_platforms(base.get("platforms"), overlay.get("platforms"), report)
    if platforms is not None:
        entry = overlay.entries.get("platforms") or base.entries["platforms"]
        merged.set("platforms", platforms, entry.key_origin)
    merged.origin = overlay.origin
    return merged

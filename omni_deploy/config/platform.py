"""Apply one platform's section to a merged config, as vllm-omni does when a server starts.

Upstream first parses every stage (`_parse_stage_deploy`: nested `engine_args`/`runtime` folded
in, typed fields split from the rest, the rest gathered into `engine_extras`), then, for the
running platform: the section's `model_runner` wins, each platform stage entry's `devices`
replaces, `env` merges, typed fields are set (one level merged for the deep-merge keys), any other
key goes into `engine_extras`, and entries for stage ids that do not exist are skipped silently.
We do the same on positioned nodes and remember the skipped entries.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from omni_deploy.common import codes
from omni_deploy.common.errors import ConfigError
from omni_deploy.config.merge import DEEP_MERGE_KEYS, merge_one_level, merge_recursive
from omni_deploy.config.nodes import Entry, Map, Node, Origin, Scalar, Seq, retag, to_plain
from omni_deploy.config.stage_schema import (
    RESERVED_STAGE_KEYS,
    STAGE_ATTRIBUTES,
    STAGE_ENGINE_FIELDS,
)

_WRAPPER_ORDER = (
    "stage_id", "devices", "num_replicas", "env", "async_chunk", "model_runner", "output_connectors",
    "input_connectors", "default_sampling_params", "default_pooling_params",
)  # fmt: skip


@dataclass(frozen=True)
class SkippedEntry:
    platform: str
    stage_id: object
    origin: Origin


@dataclass
class PlatformApplied:
    platform: str
    config: Map  # loadable deploy dict: stages normalised, no `platforms` section
    stages: list[Map] = field(default_factory=list)  # normalised stages (engine_extras explicit)
    skipped: list[SkippedEntry] = field(default_factory=list)
    model_runner: str = "v1"


def _as_map(node: Node | None, what: str) -> Map | None:
    if node is None or (isinstance(node, Scalar) and node.value is None):
        return None
    if not isinstance(node, Map):
        raise ConfigError(f"{what} must be a mapping", node.origin.location, code=codes.E120)
    return node


def parse_stage(stage: Map) -> Map:
    """Normalise one stage as `_parse_stage_deploy` does; `engine_extras` always present."""
    flat = Map({k: e for k, e in stage.entries.items() if k not in RESERVED_STAGE_KEYS}, stage.origin)
    extras = _as_map(stage.get("engine_extras"), "engine_extras") or Map({}, stage.origin)
    runtime = _as_map(stage.get("runtime"), "runtime") or Map({}, stage.origin)
    _merge_engine_args(flat, _as_map(stage.get("engine_args"), "engine_args"))
    out = Map({}, stage.origin)
    out.entries["stage_id"] = stage.entries["stage_id"]
    for key in ("devices", "num_replicas", "env"):
        wrapper = runtime.entries.get(key) or stage.entries.get(key)
        if wrapper is not None:
            out.entries[key] = wrapper
    replicas = out.entries.get("num_replicas")
    if replicas is not None:
        out.entries["num_replicas"] = _replicas(replicas)
    for key in _WRAPPER_ORDER[4:]:
        wrapper = stage.entries.get(key)
        if wrapper is not None:
            out.entries[key] = wrapper
    for name in STAGE_ENGINE_FIELDS:
        field_entry = flat.pop(name)
        if field_entry is not None:
            out.entries[name] = field_entry
    merged_extras = merge_recursive(extras, flat)
    extras_entry = stage.entries.get("engine_extras")
    out.entries["engine_extras"] = Entry(
        extras_entry.key_origin if extras_entry else stage.origin, merged_extras
    )
    return out


def _merge_engine_args(flat: Map, engine_args: Map | None) -> None:
    """`engine_args` over the stage's own keys, mappings merged recursively."""
    for key, entry in engine_args.entries.items() if engine_args is not None else []:
        existing = flat.get(key)
        if isinstance(existing, Map) and isinstance(entry.node, Map):
            flat.entries[key] = Entry(entry.key_origin, merge_recursive(existing, entry.node))
        else:
            flat.entries[key] = entry


def _replicas(replicas: Entry) -> Entry:
    """num_replicas as the integer vllm-omni makes of it (`int(value)`), or E123."""
    value = replicas.node.value if isinstance(replicas.node, Scalar) else None
    number = None
    if not isinstance(value, bool) and isinstance(value, (int, float, str)):
        try:
            number = int(value)
        except (ValueError, OverflowError):  # "x", nan; .inf
            number = None
    if number is None:
        raise ConfigError("num_replicas must be an integer", replicas.node.origin.location, code=codes.E123)
    return Entry(replicas.key_origin, Scalar(number, replicas.node.origin))


def _overrides(ps: Map) -> tuple[Map, Entry | None, Entry | None]:
    """Upstream `_extract_platform_overrides`: (overrides, devices, env) of a platform entry."""
    if "engine_args" in ps:
        args = _as_map(ps.get("engine_args"), "engine_args") or Map({}, ps.origin)
        overrides = args.copy()
        runtime = _as_map(ps.get("runtime"), "runtime") or Map({}, ps.origin)
        if "num_replicas" in runtime:
            overrides.entries["num_replicas"] = runtime.entries["num_replicas"]
        return overrides, runtime.entries.get("devices"), runtime.entries.get("env")
    overrides = Map({k: e for k, e in ps.entries.items() if k not in ("stage_id", "devices", "env")})
    return overrides, ps.entries.get("devices"), ps.entries.get("env")


def _check_runner(node: Node, what: str) -> str:
    value = to_plain(node)
    if value not in ("v1", "v2"):
        raise ConfigError(
            f"{what} must be one of ('v1', 'v2'), got {value!r}", node.origin.location, code=codes.E130
        )
    return str(value)


def apply_platform(merged: Map, platform: str) -> PlatformApplied:
    """The deploy config a server on `platform` would run, as a loadable mapping."""
    layer = f"platform:{platform}"
    platforms = merged.get("platforms")
    section: Map | None = None
    if isinstance(platforms, Map):
        section = _as_map(platforms.get(platform), f"platforms.{platform}")
    runner_entry, runner = _model_runner(merged, section, platform, layer)
    stages_node = merged.get("stages")
    stages = [_parsed(stage) for stage in (stages_node.items if isinstance(stages_node, Seq) else [])]
    by_id: dict[Hashable, Map] = {to_plain(s.get("stage_id")): s for s in stages}
    skipped: list[SkippedEntry] = []
    platform_stages = section.get("stages") if section is not None else None
    for ps in platform_stages.items if isinstance(platform_stages, Seq) else []:
        if not isinstance(ps, Map) or "stage_id" not in ps:
            raise ConfigError(
                f"each entry of platforms.{platform}.stages needs a stage_id",
                ps.origin.location,
                code=codes.E122,
            )
        sid = _scalar_stage_id(ps)
        target = by_id.get(sid)
        if target is None:
            skipped.append(SkippedEntry(platform, sid, ps.origin))
        else:
            _apply_entry(target, ps, layer)
    config = merged.copy()
    config.pop("platforms")
    if runner_entry is not None:
        config.entries["model_runner"] = runner_entry
    if "stages" in merged:
        config.entries["stages"] = Entry(
            merged.entries["stages"].key_origin,
            Seq([loadable_stage(s) for s in stages], stages_node.origin if stages_node else merged.origin),
        )
    return PlatformApplied(platform, config, stages, skipped, runner)


def _model_runner(merged: Map, section: Map | None, platform: str, layer: str) -> tuple[Entry | None, str]:
    """The model_runner entry that applies on `platform` (the section's wins), and its value."""
    runner_entry = merged.entries.get("model_runner")
    if section is not None and "model_runner" in section:
        platform_runner = section.entries["model_runner"]
        _check_runner(platform_runner.node, "platform model_runner")
        runner_entry = Entry(platform_runner.key_origin, retag(platform_runner.node, layer))
    runner = _check_runner(runner_entry.node, "model_runner") if runner_entry else "v1"
    if runner == "v2" and platform in ("npu", "xpu"):
        where = runner_entry.node.origin.location if runner_entry else None
        raise ConfigError(
            f"model_runner v2 is not supported on {platform}",
            where,
            code=codes.E370,
            hint="vllm-omni refuses to start; use model_runner: v1 for this platform",
        )
    return runner_entry, runner


def _parsed(stage: Node) -> Map:
    if not isinstance(stage, Map) or "stage_id" not in stage:
        raise ConfigError(
            "each stage must be a mapping with a stage_id", stage.origin.location, code=codes.E121
        )
    _scalar_stage_id(stage)
    return parse_stage(stage)


def _is_set(entry: Entry | None) -> bool:
    return entry is not None and not (isinstance(entry.node, Scalar) and entry.node.value is None)


def _apply_entry(target: Map, ps: Map, layer: str) -> None:
    """One platform stage entry over its stage, as `_apply_platform_overrides` does."""
    overrides, devices, env = _overrides(ps)
    if devices is not None and _is_set(devices):
        target.entries["devices"] = Entry(devices.key_origin, retag(devices.node, layer))
    if env is not None and _is_set(env):
        base_env = target.get("env")
        new_env = retag(env.node, layer)
        if isinstance(base_env, Map) and isinstance(new_env, Map):
            new_env = merge_one_level(base_env, new_env)
        target.entries["env"] = Entry(env.key_origin, new_env)
    extras = target.get("engine_extras")
    assert isinstance(extras, Map)
    for key, entry in overrides.entries.items():
        value = Entry(entry.key_origin, retag(entry.node, layer))
        if key not in STAGE_ATTRIBUTES:
            extras.entries[key] = value
            continue
        current = target.get(key)
        if key in DEEP_MERGE_KEYS and isinstance(value.node, Map) and isinstance(current, Map):
            value = Entry(value.key_origin, merge_one_level(current, value.node))
        target.entries[key] = value


def loadable_stage(stage: Map) -> Map:
    """A normalised stage written back flat, so that vllm-omni parses it to the same result.

    Extras are written as plain stage keys (they fall back into engine_extras on load); only an
    extra whose name a stage key would shadow stays under an explicit `engine_extras`.
    """
    out = Map({}, stage.origin)
    kept_extras = Map({}, stage.origin)
    for key, entry in stage.entries.items():
        if key == "engine_extras":
            continue
        optional = key in ("devices", "env", "async_chunk") or key in _WRAPPER_ORDER[5:]
        if optional and isinstance(entry.node, Scalar) and entry.node.value is None:
            continue
        out.entries[key] = entry
    extras = stage.get("engine_extras")
    assert isinstance(extras, Map)
    for key, entry in extras.entries.items():
        if key in RESERVED_STAGE_KEYS or key in STAGE_ATTRIBUTES:
            kept_extras.entries[key] = entry
        else:
            out.entries[key] = entry
    if kept_extras.entries:
        out.entries["engine_extras"] = Entry(stage.entries["engine_extras"].key_origin, kept_extras)
    return out


def _scalar_stage_id(stage: Map) -> Hashable:
    """A stage_id usable as a key; `stage_id: [1]` is a finding, not a crash."""
    node = stage.get("stage_id")
    if not isinstance(node, Scalar):
        where = node.origin.location if node is not None else stage.origin.location
        raise ConfigError("stage_id must be an integer", where, code=codes.E123)
    value: Hashable = node.value
    return value

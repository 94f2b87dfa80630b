"""A stage's devices against its parallel sizes, as vllm-omni's stage runtime checks them before any
engine starts: the replica split (`split_devices_for_replicas`, run over every stage first) and the
device-layout check (`_check_stage_device_layout`, per LLM stage). Each rule applies where the
target's code has its raising line (knowledge facts stage_device_layout, replica_device_split,
replica_template_offsets), on each platform's view (a platform section's devices, a base file's
tensor_parallel_size), and is reported at the same keys as the server check reports the refusal.
"""

from __future__ import annotations

from dataclasses import dataclass

from omni_deploy.common import codes, jsonpath
from omni_deploy.config.nodes import Map, Scalar, to_plain
from omni_deploy.config.stage_process import stage_value
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at
from omni_deploy.validate.rules import emits

_LLM = ("llm_ar", "llm_generation")


@dataclass(frozen=True)
class Layout:
    """One stage's layout as the stage runtime reads it (engine/stage_init_utils.py)."""

    devices: list[str] | None  # the comma-separated ids; None: no `devices`, vLLM places the stage
    replicas: int
    tp: int
    dp: int  # data_parallel_size_local, else data_parallel_size
    pp: int

    @property
    def world(self) -> int:
        return self.tp * self.dp * self.pp


def _int(stage: Map, key: str, falsy_default: bool) -> int | None:
    """int() of the stage's value as upstream casts it (`int(value or 1)` where `falsy_default`,
    else `int(value)` with None as 1); None for a value int() refuses (another finding's business)."""
    node = stage_value(stage, key)
    parallel = stage_value(stage, "parallel_config")
    if node is None and isinstance(parallel, Map):
        node = parallel.get(key)  # a stage's parallel_config mapping: the typed config's parallel sizes
    value = node.value if isinstance(node, Scalar) else None
    if value is None or (falsy_default and not value):
        return 1
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def layout(stage: Map) -> Layout | None:
    """The stage's layout, or None where a value is not what int() takes."""
    node = stage_value(stage, "devices")
    devices: list[str] | None = None
    if isinstance(node, Scalar) and node.value is not None:
        devices = [d.strip() for d in str(node.value).split(",")]
        if not all(d.isdigit() for d in devices):
            return None  # not a list of device indices: the schema's E201 says so
    elif node is not None and not isinstance(node, Scalar):
        return None
    local = stage_value(stage, "data_parallel_size_local")
    dp_key = (
        "data_parallel_size_local"
        if isinstance(local, Scalar) and local.value is not None
        else "data_parallel_size"
    )
    sizes = [_int(stage, "num_replicas", True), _int(stage, "tensor_parallel_size", True),
             _int(stage, dp_key, False), _int(stage, "pipeline_parallel_size", True)]  # fmt: skip
    if any(size is None for size in sizes):
        return None
    replicas, tp, dp, pp = (int(size or 0) for size in sizes)
    return Layout(devices, max(1, replicas), tp, dp, pp)


def replica_problem(shape: Layout) -> str | None:
    """What split_devices_for_replicas raises for the layout (None: it splits)."""
    if shape.devices is None or shape.replicas <= 1:
        return None
    per = shape.tp * max(1, shape.dp) * shape.pp
    count = len(shape.devices)
    if count == shape.replicas * per:
        return None
    if count == per:
        try:
            offsets = [int(d) for d in shape.devices]
        except ValueError:
            return "template"  # its own ValueError ("template-mode devices must be ints")
        bad = [o for o in offsets if not 0 <= o < per]
        return f"template offsets {bad} outside [0, {per})" if bad else None
    return f"{count} device id(s), where {per} (one replica) or {shape.replicas * per} (all {shape.replicas}) are needed"


def layout_problem(shape: Layout) -> str | None:
    """What _check_stage_device_layout raises for the layout (None: it passes)."""
    if shape.devices is None or shape.dp == 0 or not shape.devices:
        return None
    count, world = len(shape.devices), shape.world
    if count in (world, shape.replicas * world):
        return None
    return (
        f"{count} device id(s), but tensor_parallel_size {shape.tp} x data parallel {shape.dp} x "
        f"pipeline_parallel_size {shape.pp} is {world}"
        + (f" (x num_replicas {shape.replicas}: {shape.replicas * world})" if shape.replicas > 1 else "")
    )


def _problem(
    shape: Layout, split_at: str | None, offsets_at: str | None, checked_at: str | None
) -> tuple[str | None, str | None]:
    """(what is wrong, the upstream line that raises) in the stage runtime's order: the replica split
    (run over every stage first), then the device-layout check."""
    if split_at:
        problem = replica_problem(shape)
        if problem is not None:
            return problem, offsets_at if problem.startswith("template offsets") else split_at
    if checked_at:
        return layout_problem(shape), checked_at
    return None, None


@emits(codes.E392)
def check_device_layout(ctx: Context) -> list[Finding]:
    """A stage's devices against its parallel sizes, per platform, where the target checks them.

    E392:
        What it does: on each platform's view of the file (its section applied, base files merged),
            counts each LLM stage's `devices` against tensor_parallel_size x data parallel size x
            pipeline_parallel_size (once, or num_replicas times), as the stage runtime does
            (engine/stage_init_utils.py `_check_stage_device_layout`, raising at :1471 in 0.30.0),
            and a num_replicas > 1 stage's devices against one replica's or all replicas' count
            (`split_devices_for_replicas`, :864; a template's offsets, :858). Reported at every key
            of the stage that makes the layout, as the server check reports the refusal.
        Why: vllm-omni refuses the whole server before any engine starts; a platform section or an
            overlay that changes devices or tensor_parallel_size without the other is how it
            happens.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 0
                tensor_parallel_size: 2
                devices: "0"
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 0
                tensor_parallel_size: 2
                devices: "0,1"
    """
    from omni_deploy.validate.check_pipeline import target_stages
    from omni_deploy.validate.server_check.locate import layout_places

    reads = ctx.target_reads
    checked_at = reads.fact("stage_device_layout")
    split_at, offsets_at = reads.fact("replica_device_split"), reads.fact("replica_template_offsets")
    # Verified by running the stage runtime's own steps from 0.30.0 on (the typed config at start-up);
    # older releases start through their legacy stage configs, whose platform overlay differs.
    if not (checked_at or split_at) or not reads.fact("typed_config_at_startup"):
        return []
    kinds = target_stages(ctx) or {}
    found: dict[tuple[str, int, int, str], tuple[Finding, list[str]]] = {}
    for platform, applied in ctx.applied.items():
        for stage in applied.stages:
            sid = to_plain(stage.get("stage_id"))
            shape = layout(stage)
            if not isinstance(sid, int) or isinstance(sid, bool) or shape is None:
                continue
            if kinds.get(sid) not in _LLM:
                continue  # a diffusion stage's layout is its parallel_config's world size; unknown: not judged
            problem, cited = _problem(shape, split_at, offsets_at, checked_at)
            if problem is None or problem == "template":
                continue
            message = (
                f"stage {sid} on {{platform}}: devices {','.join(shape.devices or [])!r} has {problem}: "
                f"vllm-omni refuses it before any engine starts ({cited})"
            )
            hint = "set devices and tensor_parallel_size (and num_replicas) together, in the same layer"
            spots = layout_places(ctx.deployment.config, sid, platform)
            if not spots:
                spots_findings = [at(None, ctx.file, codes.E392, jsonpath.stage(sid), message, hint)]
            else:
                spots_findings = [at(s.origin, ctx.file, codes.E392, s.path, message, hint) for s in spots]
            for finding in spots_findings:
                key = (finding.file, finding.line, finding.column, finding.path)
                found.setdefault(key, (finding, []))[1].append(platform)
    return [_on(finding, platforms) for finding, platforms in found.values()]


def _on(finding: Finding, platforms: list[str]) -> Finding:
    from dataclasses import replace

    return replace(finding, message=finding.message.replace("{platform}", ", ".join(platforms)))

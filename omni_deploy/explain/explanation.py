"""What `omni-deploy explain` says about a deploy file: per platform, the speaker-embedding decision
of the launch spec (what `serve` and `k8s` would launch with) or an overview of stages, devices and
Code2Wav knobs; as a dict (JSON) or as text.

Pure: the host snapshot and the environment are passed in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from omni_deploy.config.stage_schema import PLATFORMS
from omni_deploy.config.yaml_loader import display_path
from omni_deploy.deployment.model import Deployment
from omni_deploy.explain.overview import overview
from omni_deploy.integrations.report import startup_fallback
from omni_deploy.integrations.speaker_rules import (
    ENV_REPORT_DIR,
    ENV_VERIFIED_ONLY,
    KEY_DEVICE_SPK,
    PLUGIN_NAME,
    PLUGINS_ALLOWLIST_ENV,
    VERIFIED_VLLM_OMNI,
    Backend,
    allowlist_fix,
    allowlist_near_miss,
)
from omni_deploy.knowledge.versions import RELEASED
from omni_deploy.launch.options import LaunchOptions
from omni_deploy.launch.spec import launch_spec
from omni_deploy.speaker_backend import (
    HostCaps,
    OwnBehaviour,
    Preparation,
    SpeakerDecision,
    reference_preparation,
    with_prefetch,
)


@dataclass
class Explanation:
    deployment: Deployment
    host: HostCaps
    backend_only: bool
    decisions: dict[str, SpeakerDecision]
    result: dict[str, Any]  # what -o json prints
    preparations: dict[str, Preparation | None] = field(default_factory=dict)
    own: dict[str, list[OwnBehaviour]] = field(default_factory=dict)  # the release's own Code2Wav
    release: str = RELEASED  # the vllm-omni release `own` describes


def platform_origin(platform: str | None, backend_only: bool) -> str:
    """What the platform reason of each decision says it came from: the option only when it was given."""
    if platform == "all":
        return "--platform all"
    if platform is not None:
        return "--platform"
    if backend_only:
        return "no --platform: every platform explained"
    return "no --platform: cuda and the file's platform sections"


def choose_platforms(deployment: Deployment, platform: str | None, backend_only: bool) -> tuple[str, ...]:
    """--platform: all five, one, or (default) all five for --backend, cuda plus the file's sections otherwise."""
    if platform == "all" or (platform is None and backend_only):
        return PLATFORMS
    if platform is not None:
        return (platform,)
    return deployment.default_platforms()


def explain(
    deployment: Deployment,
    platforms: tuple[str, ...],
    backend_only: bool,
    host: HostCaps,
    env: dict[str, str],
    override: Backend | None,
    target_version: str | None = None,
    origin: str = "--platform",
) -> Explanation:
    """`origin`: where `platforms` came from (`platform_origin`), as each decision's platform reason says."""
    info, extra = deployment.pipeline, deployment.code2wav_extra()
    decisions = {
        p: launch_spec(
            deployment,
            LaunchOptions(platform=p, spk_backend=override, platform_origin=origin),
            host=host,
            env=env,
        ).decision
        for p in platforms
    }
    from omni_deploy.knowledge.target import for_host
    from omni_deploy.speaker_backend import at_release, on_release_device, with_release_tf32

    reads = for_host(target_version or host.vllm_omni or RELEASED)
    if not host.probed:
        # What the target release's own code can carry out (speaker_backend/reach.py): no Code2Wav stage
        # before 0.26.0, no plugin hook in 0.26.0, no TensorRT switch before 0.28.0.
        decisions = {p: at_release(d, reads) for p, d in decisions.items()}
    # Off CUDA the release's own code picks CAM++'s device (torch on the NPU from 0.32.0rc1 on).
    decisions = {p: on_release_device(d, reads) for p, d in decisions.items()}
    own = {p: _own(deployment, reads, p, env) for p in platforms}
    decisions = {p: with_release_tf32(d, own[p], env) for p, d in decisions.items()}
    result: dict[str, Any] = {
        "file": deployment.name,
        "pipeline": info.name,
        "pipeline_source": info.source,
        "target_version": target_version or host.vllm_omni,
        # What --probe found on this host; null otherwise (then the decision is for the serving
        # host that target_version describes). Always present: one shape (docs/json-output.md).
        "host": host.as_dict() if host.probed else None,
    }
    preparations = {
        p: with_prefetch(reference_preparation(deployment, d), _prefetch_on(own[p]))
        for p, d in decisions.items()
    }
    if backend_only:
        result["platforms"] = {
            p: {**d.as_dict(), "reference_preparation": _as_dict(preparations[p])}
            for p, d in decisions.items()
        }
    else:
        result["platforms"] = {
            p: overview(deployment.on(p), info, extra, decisions[p].speaker_backend) for p in platforms
        }
    from omni_deploy.deployment.code2wav_caches import code2wav_caches

    caches = code2wav_caches(deployment, reads)
    for p in platforms:
        result["platforms"][p]["vllm_omni_own"] = [b.as_dict() for b in own[p]]
        if not backend_only:
            result["platforms"][p]["code2wav_caches"] = caches.as_dict() if caches is not None else None
    return Explanation(deployment, host, backend_only, decisions, result, preparations, own, reads.version)


def _prefetch_on(own: list[OwnBehaviour]) -> bool:
    return any(b.topic == "reference_prefetch" and b.value is True for b in own)


def _own(deployment: Deployment, reads: Any, platform: str, env: dict[str, str]) -> list[OwnBehaviour]:
    """What the target release's own Code2Wav does with the file on `platform` (MiniCPM-o 4.5 only)."""
    from omni_deploy.speaker_backend import code2wav_own, speaker_inputs

    if not deployment.pipeline.is_minicpmo:
        return []
    inputs = speaker_inputs(deployment, platform)
    environ = {**env, **{name: var.value for name, var in inputs.in_file.items()}}
    return code2wav_own(reads, platform, inputs.extra, inputs.extra_path, environ)


def _as_dict(preparation: Preparation | None) -> dict[str, Any] | None:
    return preparation.as_dict() if preparation is not None else None


def as_json(explanation: Explanation) -> str:
    from omni_deploy.common.output.json_doc import dumps
    from omni_deploy.common.redact import env_shown_data
    from omni_deploy.config.nodes import env_values

    # A value the file took from the environment is shown as its ${oc.env:...} expression.
    return dumps(env_shown_data(explanation.result, env_values(explanation.deployment.config)))


def as_text(explanation: Explanation) -> str:
    info, host = explanation.deployment.pipeline, explanation.host
    lines = [
        f"file: {display_path(explanation.deployment.top)}",
        f"pipeline: {info.name or 'unknown'} ({info.source})",
        _host_line(host),
    ]
    if host.probed:
        lines += probe_notes(host)
    if explanation.backend_only:
        for p, d in explanation.decisions.items():
            lines += _decision_lines(p, d)
            prep = explanation.preparations.get(p)
            if prep is not None:
                lines.append(f"  {prep.line()}")
                lines += [f"  warning: {w}" for w in prep.warnings]
            lines += _own_lines(explanation, p)
    else:
        for p, data in explanation.result["platforms"].items():
            lines += _overview_lines(p, data)
            lines += _own_lines(explanation, p)
    from omni_deploy.common.redact import env_shown
    from omni_deploy.config.nodes import env_values

    values = env_values(explanation.deployment.config)  # shown as their ${oc.env:...} expressions
    return "\n".join(
        line if isinstance(line, _Table) else _escaped(env_shown(line, values)) for line in lines
    )


def _few(items: list[Any], shown: int = 16) -> str:
    """A list for a line of text: its first `shown` items and how many more (a file may have thousands)."""
    if len(items) <= shown:
        return str(items)
    return str(items[:shown])[:-1] + f", ... {len(items) - shown} more]"


class _Table(str):
    """A table from output.tables: its cells are escaped already (and it may hold our colours)."""


def _escaped(line: str) -> str:
    """A line of explain's text with what came from files made safe (leading blank lines kept)."""
    from omni_deploy.common.output.escape import for_terminal

    body = line.lstrip("\n")
    return "\n" * (len(line) - len(body)) + for_terminal(body)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _installed(host: HostCaps, name: str, version: str | None) -> str:
    if version is not None:
        return version
    problem = host.version_problems.get(name)
    return "not installed" if problem is None else f"unknown (its metadata gives {problem})"


def _host_line(host: HostCaps) -> str:
    if not host.probed:
        return (
            f"host: assumed serving host with vllm-omni {host.vllm_omni} and omni-deploy[speaker] "
            "(--probe checks this one)"
        )
    return (
        f"host (probed): GPUs {', '.join(host.gpus) or 'none'} [{host.gpu_query}]; torch {_yes(host.torch)}, "
        f"onnx {_yes(host.onnx)}, onnxruntime {_yes(host.onnxruntime)}, tensorrt {_yes(host.tensorrt)}; "
        f"vllm {_installed(host, 'vllm', host.vllm)}, vllm-omni {_installed(host, 'vllm-omni', host.vllm_omni)}"
        + ("" if host.versions_match is not False else " (major.minor differ!)")
        + f"; omni-deploy plugin {'registered' if host.plugin_registered else 'not registered'}"
    )


def probe_notes(host: HostCaps) -> list[str]:
    """What on this host can silently keep the CUDA CAM++ path out of the server."""
    notes = []
    if host.plugins_allowlist is None:
        notes.append(f"  {PLUGINS_ALLOWLIST_ENV}: unset (vLLM loads every plugin)")
    elif host.plugin_allowed:
        notes.append(f"  {PLUGINS_ALLOWLIST_ENV}={host.plugins_allowlist}: names {PLUGIN_NAME}")
    else:
        near = allowlist_near_miss(host.plugins_allowlist)
        why = f" (vLLM compares {near!r}: it splits on commas and strips nothing)" if near else ""
        notes.append(
            f"  warning: {PLUGINS_ALLOWLIST_ENV}={host.plugins_allowlist} is an allowlist without {PLUGIN_NAME}{why}: "
            "vLLM will not load omni-deploy's plugin, and the Code2Wav stage keeps ONNX Runtime on the CPU; "
            f"fix: {PLUGINS_ALLOWLIST_ENV}={allowlist_fix(host.plugins_allowlist)}"
        )
    if host.vllm_on_path is None:
        notes.append("  `vllm` on PATH: none (omni-deploy serve needs one)")
    elif host.vllm_elsewhere:
        notes.append(
            f"  warning: the `vllm` first on PATH ({host.vllm_on_path}) runs with {host.vllm_on_path_python}, "
            "another environment than omni-deploy's: a server started with it does not see this plugin"
        )
    else:
        notes.append(f"  `vllm` on PATH: {host.vllm_on_path} (this environment)")
    if host.vllm_omni_reads_device_spk:
        notes.append(
            f"  the installed vllm-omni reads {KEY_DEVICE_SPK} itself: its code decides the speaker "
            "backend and omni-deploy's plugin stands aside"
        )
    notes += _version_notes(host)
    if host.report_line_logged is True:
        notes.append(f"  report line: in the server log ({host.report_line_why})")
    else:
        notes.append(
            f"  note: the plugin's INFO report line will not be in the server log ({host.report_line_why}); "
            f"its report files still are where {ENV_REPORT_DIR} says (omni-deploy serve sets it and reads them)"
        )
    notes += _server_report_notes(host)
    return notes


def _version_notes(host: HostCaps) -> list[str]:
    if host.vllm_omni is None:
        return []
    notes = []
    verified = ", ".join(VERIFIED_VLLM_OMNI)
    if host.vllm_omni_verified:
        notes.append(f"  vllm-omni {host.vllm_omni}: a release the plugin is verified against")
    elif host.verified_only:
        notes.append(
            f"  warning: vllm-omni {host.vllm_omni} is not a release the plugin is verified against ({verified}) "
            f"and {ENV_VERIFIED_ONLY}=1 refuses it: every model keeps vllm-omni's own speaker path"
        )
    else:
        notes.append(
            f"  warning: vllm-omni {host.vllm_omni} is not a release the plugin is verified against ({verified}); "
            "it patches only where the code has the shapes it checks:"
        )
    for model, problems in sorted(host.plugin_shapes.items()):
        layout = host.plugin_layouts.get(model)
        state = (
            "; ".join(problems) if problems else f"every shape the patch relies on is there (layout {layout})"
        )
        notes.append(f"    {model}: {'warning: cannot patch: ' if problems else ''}{state}")
    return notes


def _server_report_notes(host: HostCaps) -> list[str]:
    if not host.server_reports:
        where = f" in {host.server_reports_from}" if host.server_reports_from else ""
        return [f"  last server report: none found{where}"]
    notes = [f"  last server report ({host.server_reports_from}):"]
    for r in host.server_reports:
        where = f"stage {r.get('stage')}" if str(r.get("stage", "")).isdigit() else str(r.get("stage"))
        retired = f", retired: {r['retired']}" if r.get("retired") else ""
        notes.append(
            f"    {r.get('model')} {where}: {r.get('backend')} on {r.get('device')} (decided by {r.get('why')}; "
            f"vllm-omni {r.get('vllm_omni')}; pid {r.get('pid')} on {r.get('host')}, {r.get('time')}{retired})"
        )
        advice = startup_fallback(str(r.get("why", "")), str(r.get("prepare", "n/a")))
        if advice is not None:
            notes.append(f"      warning: {advice}")
    return notes


def _decision_lines(platform: str, d: SpeakerDecision) -> list[str]:
    lines = [f"\n{platform}: {d.speaker_backend}  [{d.provider}]"]
    if d.weights_dtype:
        tf32 = {True: "on", False: "off", None: "n/a"}[d.matmul_tf32]
        lines.append(
            f"  precision: weights {d.weights_dtype}, inputs {d.inputs_dtype}, matmul TF32 {tf32}"
            + (f", cuDNN TF32: {d.cudnn_tf32}" if d.cudnn_tf32 else "")
        )
    lines.append("  decided by:")
    lines += [f"    {r.setting} = {json.dumps(r.value)}  ({r.origin})" for r in d.reasons]
    if d.fallbacks:
        lines.append("  to switch:")
        lines += [f"    {f.backend}: {f.how}" for f in d.fallbacks]
    lines += [f"  warning: {w}" for w in d.warnings]
    return lines


def _own_lines(explanation: Explanation, platform: str) -> list[str]:
    own = explanation.own.get(platform)
    if not own:
        return []
    return [f"  vllm-omni {explanation.release}'s own Code2Wav:", *(f"    {b.line()}" for b in own)]


def _gib(value: Any) -> str:
    return f"{value / 1024**3:.2f} GiB" if isinstance(value, int) and not isinstance(value, bool) else "-"


_STAGE_COLUMNS = (
    ("stage", "stage_id"), ("role", "role"), ("devices", "devices"), ("seqs", "max_num_seqs"),
    ("max_len", "max_model_len"), ("batched", "max_num_batched_tokens"),
    ("KV budget", "kv_cache_memory_bytes"), ("gpu mem", "gpu_memory_utilization"),
)  # fmt: skip


def _stage_table(stages: list[dict[str, Any]]) -> str:
    from omni_deploy.common.output.tables import Column, to_text

    columns = [Column(title, numeric=title not in ("role", "devices")) for title, _ in _STAGE_COLUMNS]
    rows = [
        [_gib(s[key]) if key == "kv_cache_memory_bytes" else s[key] for _, key in _STAGE_COLUMNS]
        for s in stages
    ]
    return _Table(to_text(columns, rows, indent=2))


def _overview_lines(platform: str, data: dict[str, Any]) -> list[str]:
    lines = [f"\n== {platform} (model runner {data['model_runner']})", _stage_table(data["stages"])]
    for device, d in data["devices"].items():
        kv = f", KV budgets {_gib(d['kv_cache_bytes'])}" if d["kv_cache_bytes"] else ""
        lines.append(
            f"  device {device}: stages {_few(d['stages'])} ask for {d['gpu_memory_utilization']:g} of its memory{kv}"
        )
    if data["code2wav"] is not None:
        knobs = ", ".join(f"{k}={json.dumps(v)}" for k, v in data["code2wav"].items() if v is not None)
        lines.append(f"  code2wav: {knobs}")
    lines += _cache_lines(data.get("code2wav_caches"))
    return lines


def _cache_lines(caches: dict[str, Any] | None) -> list[str]:
    """Code2Wav's voice caches against the voices a forward batches (validate's I366/I367 say what to change)."""
    if not caches or (caches["setup"] is None and caches["prompt"] is None):
        return []
    batch = caches["max_num_seqs"]
    lines = [
        f"  code2wav voice caches (a forward batches up to {batch if batch is not None else '?'} requests):"
    ]
    for label, cache in (("setup", caches["setup"]), ("prompt", caches["prompt"])):
        if cache is None:
            continue
        short = batch is not None and cache["voices"] < batch
        again = (
            "a forward of more cached voices than this runs every voice's setup again"
            if label == "setup"
            else "a voice that left it prepares its prompt again"
        )
        what = f"fewer than a batch: {again}" if short else "holds a full batch of voices"
        lines.append(
            f"    {label:<6} {cache['voices']:>3} voices  {cache['key']} ({cache['origin']}): {what}"
        )
    if caches["setup_gib"] is not None and caches["setup"] is not None:
        lines.append(
            f"    the setup cache holds about {caches['setup_gib']:g} GiB of the stage's GPU memory "
            f"({caches['gib_per_cached_setup']} GiB a voice, measured), outside vLLM's accounting"
        )
    return lines

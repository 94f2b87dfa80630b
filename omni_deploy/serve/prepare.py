"""serve, step 1: validate, take the launch spec (speaker decision, rendered file, command), and,
once nothing refuses it, write it into a fresh run directory.

Nothing is started here. The host snapshot is taken once by the caller and passed in; the dry run
and the real run decide with the same one (`serving_host`), so a dry run tells what the real run
would do on this host. Only --skip-preflight decides for the intended serving host (omni-deploy
[speaker] installed) instead of this one, for both. `assumptions` lists every such choice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_deploy.common.output.escape import control_free, shell_word
from omni_deploy.common.redact import redact_env
from omni_deploy.deployment.model import Deployment
from omni_deploy.launch.plan import LaunchPlan
from omni_deploy.launch.spec import LaunchSpec, launch_spec
from omni_deploy.serve.preflight import Preflight, Refusal, run_preflight
from omni_deploy.serve.request import ServeRequest
from omni_deploy.serve.rundir import REPORT_SUBDIR, make_run_dir, write_new, write_record
from omni_deploy.speaker_backend import HostCaps, SpeakerDecision
from omni_deploy.validate.context import Options
from omni_deploy.validate.runner import FileReport, validate_file


@dataclass
class Prepared:
    spec: LaunchSpec
    plan: LaunchPlan
    preflight: Preflight
    directory: Path | None  # None: nothing written (a refused run, or a dry run without --run-dir)
    config_path: Path | None
    assumptions: list[str] = dataclasses.field(default_factory=list)

    @property
    def decision(self) -> SpeakerDecision:
        return self.spec.decision

    @property
    def notes(self) -> list[str]:
        return self.spec.rendered.notes


def serving_host(host: HostCaps, skip_preflight: bool) -> HostCaps:
    """The host the speaker decision is for: this one, the same for the dry run and the real run;
    with --skip-preflight (this host is not checked) the intended serving host, also for both."""
    if not skip_preflight:
        return host
    return dataclasses.replace(host, probed=False, torch=True, onnx=True, plugin_registered=True)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def host_assumption(host: HostCaps, skip_preflight: bool) -> str:
    """What the speaker decision took the serving host to be, in one line."""
    if skip_preflight:
        return (
            "speaker backend decided for a serving host with omni-deploy[speaker] and its vLLM plugin "
            "installed (--skip-preflight: this host is not read)"
        )
    return (
        f"speaker backend decided for this host as probed: torch {_yes(host.torch)}, onnx {_yes(host.onnx)}, "
        f"omni-deploy plugin {'registered' if host.plugin_registered else 'not registered'}, "
        f"vllm-omni {host.vllm_omni or 'not installed'}, GPUs: {host.gpu_query}"
    )


def check(request: ServeRequest) -> FileReport:
    """Validate the file for the one platform served (report.deployment is what the rest uses)."""
    options = Options(
        platforms=(request.platform,),
        target_version=request.target_version,
        strict=request.strict,
        ignore=request.ignore,
    )
    return validate_file(request.file, options)


def decide(
    request: ServeRequest,
    deployment: Deployment,
    host: HostCaps,
    env: dict[str, str],
    warn: Callable[[str], None],
) -> Prepared:
    """The launch spec, its preflight and its assumptions, with nothing written (the plan names the
    run directory's files as placeholders; `write_run` makes them real).

    `warn` hears the speaker decision's warnings as soon as it is made (before a bad passthrough
    argument stops us).
    """
    spec = launch_spec(deployment, request.launch, host=serving_host(host, request.skip_preflight), env=env)
    for warning in spec.decision.warnings:
        warn(warning)
    spec.check_passthrough()
    _ = spec.rendered  # now: a platform section that cannot apply refuses before anything is written
    preflight = run_preflight(request.launch.model, request.platform, spec.decision.speaker_backend, host)
    assumptions = [
        f"platform {request.platform} ({request.launch.platform_origin})",
        f"checked against vllm-omni {request.target_version} ({request.target_from or 'asked'})",
        host_assumption(host, request.skip_preflight),
        *(f"preflight: {note}" for note in preflight.notes),
    ]
    plan = spec.plan("<run dir>/deploy.yaml", report_dir="<run dir>/" + REPORT_SUBDIR)
    return Prepared(spec, plan, preflight, None, None, assumptions)


def write_run(prepared: Prepared, request: ServeRequest, deploy_file: str) -> Prepared:
    """The run directory with the rendered file and the record (deploy.yaml, launch.json); called only
    once nothing refuses the run (or for a dry run given --run-dir)."""
    directory = make_run_dir(request.run_dir)
    config_path = directory / "deploy.yaml"
    write_new(config_path, prepared.spec.rendered.text)
    plan = prepared.spec.plan(str(config_path), report_dir=str(directory / REPORT_SUBDIR))
    written = dataclasses.replace(prepared, plan=plan, directory=directory, config_path=config_path)
    write_record(directory, _record(written, request, deploy_file))
    return written


def prepare(
    request: ServeRequest,
    deployment: Deployment,
    host: HostCaps,
    env: dict[str, str],
    warn: Callable[[str], None],
) -> Prepared:
    """`decide`, then `write_run` unless it is a dry run without --run-dir (which writes nothing)."""
    prepared = decide(request, deployment, host, env, warn)
    if request.dry_run and request.run_dir is None:
        return prepared
    return write_run(prepared, request, str(deployment.top))


def _record(prepared: Prepared, request: ServeRequest, deploy_file: str) -> dict[str, Any]:
    return prepared.plan.record(
        {
            "deploy_file": deploy_file,
            "platform": request.platform,
            "target_version": request.target_version,
            "versions": prepared.preflight.versions,
            "dry_run": request.dry_run,
            "preflight": {
                "skipped": request.skip_preflight,
                "refusals": [r.__dict__ for r in prepared.preflight.refusals],
                "notes": prepared.preflight.notes,
            },
            "notes": prepared.notes,
            "assumptions": prepared.assumptions,
            "run_dir": str(prepared.directory),
        },
    )


def real_run_outcome(
    prepared: Prepared, skip_preflight: bool, platform_refusal: str | None, port_taken: str | None = None
) -> str:
    """What `serve` without --dry-run would do on this host with the same options, checked in the
    real run's order: the platform, preflight, then the port."""
    if platform_refusal is not None:
        return f"refuse (exit 2): {platform_refusal}"
    refusals = [] if skip_preflight else prepared.preflight.refusals
    if refusals:
        return f"refuse (exit 1): {len(refusals)} preflight refusal(s); nothing started, nothing written"
    if port_taken is not None:
        return f"refuse (exit 1): {port_taken}; nothing started, nothing written"
    return "start the server (and write its run directory)"


def dry_run_text(prepared: Prepared, fmt: str, platform: str = "", outcome: str = "") -> str:
    """What --dry-run prints: the command, environment changes, the decision, the assumptions it
    made, would-be refusals and what the real run would do."""
    plan, decision, refusals = prepared.plan, prepared.decision, prepared.preflight.refusals
    config = str(prepared.config_path) if prepared.config_path is not None else None
    if fmt == "json":
        from omni_deploy.common.output.json_doc import dumps

        out = {
            "argv": plan.shown_argv,
            "env": redact_env(plan.env_changes),
            "config": config,
            "run_dir": str(prepared.directory) if prepared.directory is not None else None,
            "platform": platform,
            "speaker_backend": decision.speaker_backend,
            "notes": prepared.notes,
            "assumptions": prepared.assumptions,
            "preflight_refusals": [r.message for r in refusals],
            "real_run": outcome,
        }
        return dumps(out)
    lines = [plan.shell()]
    for key, value in redact_env(plan.env_changes).items():
        # A control character (a newline in a value) is escaped as bash's $'...' would: never a line of its own.
        pair = f"{key}={value}" if value is not None else key
        shown = pair if control_free(pair) else shell_word(pair)
        lines.append(f"  env {shown}" if value is not None else f"  env unset {shown}")
    lines.append(
        f"config: {config}"
        if config is not None
        else "config: not written (a dry run writes nothing; --run-dir DIR keeps the rendered config)"
    )
    lines.append(f"speaker backend: {decision.speaker_backend} [{decision.provider}]")
    lines += [f"assumed: {a}" for a in prepared.assumptions]
    lines += [f"note: {note}" for note in prepared.notes]
    lines += [f"preflight would refuse: {r.message}" + (f" ({r.hint})" if r.hint else "") for r in refusals]
    if outcome:
        lines.append(f"real run on this host: {outcome}")
    return "\n".join(lines)


def refusal_lines(prepared: Prepared, skip_preflight: bool) -> tuple[list[str], list[Refusal]]:
    """What serve says about preflight before a launch, and the refusals that stop it."""
    if skip_preflight:
        return ["preflight skipped (GPU, installed versions, model assets not checked)"], []
    refusals = prepared.preflight.refusals
    lines = [f"preflight: {r.message}" + (f" ({r.hint})" if r.hint else "") for r in refusals]
    if refusals:
        lines.append("nothing started, nothing written")
    return lines, refusals

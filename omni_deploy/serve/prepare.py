"""serve, step 1: validate, take the launch spec (speaker decision, rendered file, command), write
it into a fresh run directory.

Nothing is started here. The host snapshot is taken once by the caller and passed in: preflight
checks this host with it; the speaker decision is made for the serving host, which is this host
when we launch and the intended one (omni-deploy[speaker] installed) for --dry-run and
--skip-preflight.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_deploy.deployment import Deployment
from omni_deploy.host import HostCaps
from omni_deploy.launch.plan import LaunchPlan
from omni_deploy.launch.spec import LaunchSpec, launch_spec
from omni_deploy.redact import redact_env
from omni_deploy.resolve.speaker import SpeakerDecision
from omni_deploy.serve.preflight import Preflight, Refusal, run_preflight
from omni_deploy.serve.request import ServeRequest
from omni_deploy.serve.rundir import REPORT_SUBDIR, make_run_dir, write_new, write_record
from omni_deploy.validate.context import Options
from omni_deploy.validate.runner import FileReport, validate_file


@dataclass
class Prepared:
    spec: LaunchSpec
    plan: LaunchPlan
    preflight: Preflight
    directory: Path | None  # None: a dry run without --run-dir writes nothing
    config_path: Path | None

    @property
    def decision(self) -> SpeakerDecision:
        return self.spec.decision

    @property
    def notes(self) -> list[str]:
        return self.spec.rendered.notes


def serving_host(host: HostCaps, launching: bool) -> HostCaps:
    """The host the speaker decision is for: this one when we launch, else the intended serving host."""
    if launching:
        return host
    return dataclasses.replace(host, probed=False, torch=True, onnx=True, plugin_registered=True)


def check(request: ServeRequest) -> FileReport:
    """Validate the file for the one platform served (report.deployment is what the rest uses)."""
    options = Options(
        platforms=(request.platform,),
        target_version=request.target_version,
        strict=request.strict,
        ignore=request.ignore,
    )
    return validate_file(request.file, options)


def prepare(
    request: ServeRequest,
    deployment: Deployment,
    host: HostCaps,
    env: dict[str, str],
    warn: Callable[[str], None],
) -> Prepared:
    """The launch spec, and its rendered file and record in the run directory (deploy.yaml, launch.json).

    `warn` hears the speaker decision's warnings as soon as it is made (before a bad passthrough
    argument or an unusable --run-dir stops us).
    """
    launching = not (request.dry_run or request.skip_preflight)
    spec = launch_spec(deployment, request.launch, host=serving_host(host, launching), env=env)
    rendered = spec.rendered
    for warning in spec.decision.warnings:
        warn(warning)
    spec.check_passthrough()
    preflight = run_preflight(request.launch.model, request.platform, spec.decision.speaker_backend, host)
    # A dry run leaves nothing behind unless asked to: no run directory without --run-dir.
    if request.dry_run and request.run_dir is None:
        plan = spec.plan("<run dir>/deploy.yaml", report_dir="<run dir>/" + REPORT_SUBDIR)
        return Prepared(spec, plan, preflight, None, None)
    directory = make_run_dir(request.run_dir)
    config_path = directory / "deploy.yaml"
    write_new(config_path, rendered.text)
    plan = spec.plan(str(config_path), report_dir=str(directory / REPORT_SUBDIR))
    prepared = Prepared(spec, plan, preflight, directory, config_path)
    write_record(directory, _record(prepared, request, str(deployment.top)))
    return prepared


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
            "run_dir": str(prepared.directory),
        },
    )


def dry_run_text(prepared: Prepared, fmt: str, platform: str = "") -> str:
    """What --dry-run prints: the command, environment changes, the decision, would-be refusals."""
    plan, decision, refusals = prepared.plan, prepared.decision, prepared.preflight.refusals
    config = str(prepared.config_path) if prepared.config_path is not None else None
    if fmt == "json":
        from omni_deploy.output.json_doc import dumps

        out = {
            "argv": plan.shown_argv,
            "env": redact_env(plan.env_changes),
            "config": config,
            "run_dir": str(prepared.directory) if prepared.directory is not None else None,
            "platform": platform,
            "speaker_backend": decision.speaker_backend,
            "notes": prepared.notes,
            "preflight_refusals": [r.message for r in refusals],
        }
        return dumps(out)
    lines = [plan.shell()]
    for key, value in redact_env(plan.env_changes).items():
        lines.append(f"  env {key}={value}" if value is not None else f"  env unset {key}")
    lines.append(
        f"config: {config}"
        if config is not None
        else "config: not written (a dry run writes nothing; --run-dir DIR keeps the rendered config)"
    )
    lines.append(f"speaker backend: {decision.speaker_backend} [{decision.provider}]")
    lines += [f"note: {note}" for note in prepared.notes]
    lines += [f"preflight would refuse: {r.message}" + (f" ({r.hint})" if r.hint else "") for r in refusals]
    return "\n".join(lines)


def refusal_lines(prepared: Prepared, skip_preflight: bool) -> tuple[list[str], list[Refusal]]:
    """What serve says about preflight before a launch, and the refusals that stop it."""
    if skip_preflight:
        return ["preflight skipped (GPU, installed versions, model assets not checked)"], []
    refusals = prepared.preflight.refusals
    lines = [f"preflight: {r.message}" + (f" ({r.hint})" if r.hint else "") for r in refusals]
    if refusals:
        lines.append(f"nothing started; run record in {prepared.directory}")
    return lines, refusals

"""`omni-deploy serve` from parsed options to a finished run: check, prepare, then print or launch.

What is said goes through `echo(text, err)`, so this module does no terminal I/O of its own.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass

from omni_deploy.common.errors import NoAccelerator
from omni_deploy.knowledge.versions import default_target_version
from omni_deploy.serve.ports import PortInUse, check_port_free
from omni_deploy.serve.prepare import check, decide, dry_run_text, real_run_outcome, refusal_lines, write_run
from omni_deploy.serve.request import ServeRequest
from omni_deploy.serve.start import exec_server, supervise
from omni_deploy.speaker_backend import VENDOR_TOOLS, detect_platform, probe_host
from omni_deploy.validate.reporters.text import text as report_text

Echo = Callable[[str, bool], None]  # (text, to stderr)


NO_ACCELERATOR = "no accelerator found (nvidia-smi, rocm-smi, npu-smi, xpu-smi on PATH); pass --platform"


@dataclass(frozen=True)
class PlatformChoice:
    name: str
    origin: str  # what the dry run and the decision's platform reason say it came from
    refusal: str | None = None  # why the real run would stop here (a dry run goes on, assuming `name`)


def choose_platform(requested: str, dry_run: bool, skip_preflight: bool = False) -> PlatformChoice:
    """--platform as given, else this host's accelerator. Without one the real run refuses (exit 2);
    a dry run goes on for cuda, says it assumed so, and says the real run would refuse.
    `--skip-preflight` skips the host checks, this one too: cuda is assumed for both runs, and said
    (a container whose GPU is there but whose PATH has no nvidia-smi)."""
    if requested != "auto":
        return PlatformChoice(requested, "--platform")
    found = detect_platform()
    if found is not None:
        return PlatformChoice(found, f"--platform auto: {VENDOR_TOOLS[found]} on PATH")
    if skip_preflight:
        return PlatformChoice("cuda", "--platform auto found no accelerator; --skip-preflight assumes cuda")
    if not dry_run:
        raise NoAccelerator(NO_ACCELERATOR)
    return PlatformChoice("cuda", "--platform auto found no accelerator on this host", NO_ACCELERATOR)


def _port_taken(host: str, port: int) -> str | None:
    """Why the real run could not listen on host:port now (None: it could); nothing is kept bound."""
    try:
        check_port_free(host, port)
    except PortInUse as taken:
        return str(taken)
    return None


def escaping(echo: Echo) -> Echo:
    """`echo` with every line made safe for a terminal (paths, names and values come from files)."""
    from omni_deploy.common.output.escape import for_terminal

    def safe_echo(text: str, err: bool) -> None:
        echo("\n".join(for_terminal(line) for line in text.split("\n")), err)

    return safe_echo


def run_serve(asked: ServeRequest, echo: Echo) -> int:
    """`asked.platform` may be "auto" and `asked.target_version` empty: both are settled here.

    A run that refuses (validation, preflight, a taken port) writes nothing: the run directory is
    made only once the server is about to start.
    """
    echo = escaping(echo)
    choice = choose_platform(asked.platform, asked.dry_run, asked.skip_preflight)
    request = dataclasses.replace(
        asked,
        platform=choice.name,
        target_version=asked.target_version or default_target_version(),
        target_from=asked.target_from
        if asked.target_version
        else "installed vllm-omni, else the newest final release",
        launch=dataclasses.replace(asked.launch, platform=choice.name, platform_origin=choice.origin),
    )
    report = check(request)
    if any(f.severity != "info" for f in report.findings):
        echo(report_text([report]), True)
    if not report.valid or report.deployment is None:
        echo("omni-deploy: validation failed; nothing started", True)
        return 1
    env = dict(os.environ)
    prepared = decide(
        request, report.deployment, probe_host(), env, lambda w: echo(f"omni-deploy: warning: {w}", True)
    )
    from omni_deploy.common.redact import register, secret_values

    register(secret_values(prepared.plan.argv, prepared.plan.env_changes))
    deploy_file = str(report.deployment.top)
    headless = "--headless" in request.launch.passthrough
    if request.dry_run:
        taken = None if headless else _port_taken(request.launch.host, request.launch.port)
        outcome = real_run_outcome(prepared, request.skip_preflight, choice.refusal, taken)
        if request.run_dir is not None:
            prepared = write_run(prepared, request, deploy_file)
        echo(dry_run_text(prepared, request.fmt, request.platform, outcome), False)
        return 0
    lines, refused = refusal_lines(prepared, request.skip_preflight)
    for line in lines:
        echo(f"omni-deploy: {line}", True)
    if refused:
        return 1
    if not headless:  # a headless node serves no API port
        check_port_free(request.launch.host, request.launch.port)
    prepared = write_run(prepared, request, deploy_file)
    plan, decision = prepared.plan, prepared.decision
    child_env = plan.child_env(env)
    echo(f"omni-deploy: {plan.shell()}", False)
    echo(
        f"omni-deploy: speaker backend {decision.speaker_backend} [{decision.provider}]; run dir {prepared.directory}",
        False,
    )
    if request.no_wait:
        exec_server(plan, child_env)
    supervise(
        prepared,
        child_env,
        request.launch.host,
        request.launch.port,
        request.ready_timeout,
        request.stop_grace,
        # /v1/models must list this once /health answers (a headless node serves no API)
        None if headless else request.launch.served_model_name or request.launch.model,
    )
    return 0

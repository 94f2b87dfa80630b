"""`omni-deploy serve` from parsed options to a finished run: check, prepare, then print or launch.

What is said goes through `echo(text, err)`, so this module does no terminal I/O of its own.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

from omni_deploy.errors import NoAccelerator
from omni_deploy.host import detect_platform, probe_host
from omni_deploy.knowledge.versions import default_target_version
from omni_deploy.serve.launch import exec_server, supervise
from omni_deploy.serve.ports import check_port_free
from omni_deploy.serve.prepare import check, dry_run_text, prepare, refusal_lines
from omni_deploy.serve.request import ServeRequest
from omni_deploy.validate.report import text as report_text

Echo = Callable[[str, bool], None]  # (text, to stderr)


def choose_platform(requested: str, lenient: bool) -> str:
    """--platform as given, else this host's accelerator; cuda for a dry run on a host without one."""
    if requested != "auto":
        return requested
    found = detect_platform() or ("cuda" if lenient else None)
    if found is None:
        raise NoAccelerator("no accelerator found (nvidia-smi, rocm-smi, npu-smi, xpu-smi); pass --platform")
    return found


def escaping(echo: Echo) -> Echo:
    """`echo` with every line made safe for a terminal (paths, names and values come from files)."""
    from omni_deploy.output.escape import for_terminal

    def safe_echo(text: str, err: bool) -> None:
        echo("\n".join(for_terminal(line) for line in text.split("\n")), err)

    return safe_echo


def run_serve(asked: ServeRequest, echo: Echo) -> int:
    """`asked.platform` may be "auto" and `asked.target_version` empty: both are settled here."""
    echo = escaping(echo)
    platform = choose_platform(asked.platform, asked.skip_preflight or asked.dry_run)
    request = dataclasses.replace(
        asked,
        platform=platform,
        target_version=asked.target_version or default_target_version(),
        launch=dataclasses.replace(asked.launch, platform=platform),
    )
    report = check(request)
    if any(f.severity != "info" for f in report.findings):
        echo(report_text([report]), True)
    if not report.valid or report.deployment is None:
        echo("omni-deploy: validation failed; nothing started", True)
        return 1
    env = dict(os.environ)
    prepared = prepare(
        request, report.deployment, probe_host(), env, lambda w: echo(f"omni-deploy: warning: {w}", True)
    )
    from omni_deploy.redact import register, secret_values

    register(secret_values(prepared.plan.argv, prepared.plan.env_changes))
    if request.dry_run:
        echo(dry_run_text(prepared, request.fmt, request.platform), False)
        return 0
    lines, refused = refusal_lines(prepared, request.skip_preflight)
    for line in lines:
        echo(f"omni-deploy: {line}", True)
    if refused:
        return 1
    plan, decision = prepared.plan, prepared.decision
    if "--headless" not in request.launch.passthrough:  # a headless node serves no API port
        check_port_free(request.launch.host, request.launch.port)
    child_env = plan.child_env(env)
    echo(f"omni-deploy: {plan.shell()}", False)
    echo(
        f"omni-deploy: speaker backend {decision.speaker_backend} [{decision.provider}]; run dir {prepared.directory}",
        False,
    )
    if request.no_wait:
        exec_server(plan, child_env)
    headless = "--headless" in request.launch.passthrough
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

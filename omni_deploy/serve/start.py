"""serve, step 2: start the prepared plan, replacing this process or supervising the server.

How the run ended becomes an error type the CLI maps to its exit code (cli.EXIT_CODES): the server
exiting with an error (its own code also kept in launch.json), readiness timeout, interruption.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from omni_deploy.common.errors import Interrupted, OmniDeployError, ProcessExited, ReadinessTimeout
from omni_deploy.common.probes import local_url
from omni_deploy.common.redact import environment_secrets, secret_values
from omni_deploy.integrations.speaker_rules import MINICPMO, MODELS
from omni_deploy.launch.plan import LaunchPlan
from omni_deploy.serve.prepare import Prepared
from omni_deploy.serve.rundir import REPORT_SUBDIR, add_to_record
from omni_deploy.serve.supervise import Supervisor
from omni_deploy.speaker_backend import read_report, summary_lines


def exec_server(plan: LaunchPlan, env: dict[str, str]) -> None:
    """Replace this process with the server (--no-wait); returns only by raising."""
    sys.stdout.flush()
    try:
        os.execvpe(plan.argv[0], plan.argv, env)
    except OSError as exc:
        raise OmniDeployError(f"cannot run {plan.argv[0]}: {exc}") from None


def supervise(
    prepared: Prepared,
    env: dict[str, str],
    host: str,
    port: int,
    ready_timeout: float,
    stop_grace: float,
    expected_model: str | None = None,
) -> None:
    """Run the server until it exits; a clean exit returns, anything else raises a mapped error."""
    plan, directory = prepared.plan, prepared.directory
    assert plan is not None and directory is not None
    from omni_deploy.common.output.progress import WaitReport

    supervisor = Supervisor(
        plan.argv,
        env,
        directory / "server.log",
        local_url(host, port),
        ready_timeout,
        stop_grace,
        on_wait=WaitReport("the server to be ready", ready_timeout),
        expected_model=expected_model,
        secrets=[*secret_values(plan.argv, plan.env_changes), *environment_secrets(env)],
        adopt_orphans=True,  # this process is the serve command: every orphan of the server is its
    )
    expected = prepared.decision.speaker_backend
    model = MODELS.get(prepared.spec.deployment.pipeline.name or "")
    later = model.title if model is not None and model is not MINICPMO else None
    supervisor.on_ready = lambda: report_speaker_backend(directory, expected, supervisor.say, later)
    code = supervisor.run()
    outcome = {"server_code": code, "signals": supervisor.forwarded, "ready_timeout": supervisor.timed_out}
    add_to_record(directory, {"exit": outcome})
    if supervisor.foreign is not None:
        raise ProcessExited(f"another server holds the port ({supervisor.foreign}); the server", code)
    if supervisor.timed_out:
        raise ReadinessTimeout(
            f"the server was not ready after {ready_timeout:g} s; run record in {directory}"
        )
    if supervisor.forwarded:
        raise Interrupted(
            f"interrupted: {', '.join(supervisor.forwarded)} forwarded to the server, which exited with code {code}"
        )
    if supervisor.exited_before_ready:  # with any code: a server that left before serving failed
        raise ProcessExited("the server", code)  # it said "... before it was ready" already
    if supervisor.leftovers:  # it went away by itself and left daemons behind (stopped now)
        raise ProcessExited(
            f"the server left {len(supervisor.leftovers)} process(es) running outside its process group "
            f"(stopped now: {', '.join(supervisor.leftovers)}); the server",
            code,
        )
    if code != 0:
        raise ProcessExited("the server", code)


LOG_HEAD = 16 * 1024 * 1024  # the stages report their backend while they build, near the top


def _log_head(path: Path) -> str:
    """The first LOG_HEAD bytes of our own server.log (never through a link put in its place)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb") as handle:
        return handle.read(LOG_HEAD).decode("utf-8", "replace")


def report_speaker_backend(
    directory: Path, expected: str, say: Callable[[str], None], later: str | None = None
) -> None:
    """After readiness: what each Code2Wav stage said it took (its report file, else its log line), on
    screen and in launch.json. `later`: the model settles its speaker path at its first request."""
    try:
        lines = _log_head(directory / "server.log").splitlines()
    except OSError as exc:
        say(f"WARNING: cannot read the server log for the speaker backend: {exc}")
        lines = []  # the report files may still tell
    report = read_report(lines, directory / REPORT_SUBDIR)
    # Recorded before it is said: whoever reads the line may open launch.json at once.
    try:
        add_to_record(directory, {"speaker_report": report.as_dict()})
    except (OSError, ValueError) as exc:
        say(f"WARNING: cannot record the speaker backend in launch.json: {exc}")
    for level, text in summary_lines(report, expected, later):
        say(f"WARNING: {text}" if level == "warning" else text)

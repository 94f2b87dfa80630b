"""A/B: for each source a fresh server through `omni-deploy serve`, a sweep, a stop; twice, the
second start of each in the reverse concurrency order; then the report with A as baseline."""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import subprocess
import sys
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from omni_deploy.bench.protocol import Step, SweepOptions, plan_sweep
from omni_deploy.common.errors import ProcessExited, ReadinessTimeout
from omni_deploy.common.output.escape import shell_join
from omni_deploy.common.probes import served_models
from omni_deploy.common.process_tree import EXIT_SERVER_ERROR, die_with_parent, exit_code
from omni_deploy.common.redact import redact_argv, redact_urls
from omni_deploy.serve.ports import PortInUse, check_port_free

SERVE_OPTIONS = {
    "spk-backend",
    "platform",
    "served-model-name",
    "ready-timeout",
    "env",
    "model",
    "target-version",
}


@dataclass
class Start:
    source: str  # a | b
    order: str
    serve_argv: list[str]
    steps: list[Step]
    result_dir: Path


def parse_overrides(pairs: tuple[str, ...]) -> list[str]:
    """`spk-backend=cuda-torch` -> ['--spk-backend', 'cuda-torch'] (serve options only)."""
    argv: list[str] = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in SERVE_OPTIONS:
            raise ValueError(
                f"{pair!r}: expected KEY=VALUE with KEY one of {', '.join(sorted(SERVE_OPTIONS))}"
            )
        _check_override(key, value)
        argv += [f"--{key}", value]
    return argv


def _check_override(key: str, value: str) -> None:
    """Values serve would refuse are refused here, before any server of the comparison starts."""
    from omni_deploy.common.numbers import SECONDS_LIMIT, parse_real

    if key == "ready-timeout":
        try:
            parse_real(value, 0.0, SECONDS_LIMIT, low_open=True)
        except ValueError as exc:
            raise ValueError(f"ready-timeout={value}: {exc}") from None
    elif key == "env" and not value.partition("=")[0]:
        raise ValueError(f"env={value}: expected env=KEY=VALUE")


def plan_ab(
    file: str, model: str, port: int, a: list[str], b: list[str], sweep: SweepOptions, run_root: Path
) -> list[Start]:
    starts = []
    for repeat, order in enumerate(("forward", "reverse"), start=1):
        for source, overrides in (("a", a), ("b", b)):
            result_dir = sweep.result_dir / source / f"start{repeat}-{order}"
            options = dataclasses.replace(
                sweep, order=order, result_dir=result_dir, source="baseline" if source == "a" else "candidate"
            )
            serve_argv = [
                sys.executable,
                "-m",
                "omni_deploy",
                "serve",
                file,
                "--model",
                model,
                "--port",
                str(port),
                "--run-dir",
                str(run_root / f"{source}-start{repeat}"),
                *overrides,
            ]
            starts.append(Start(source, order, serve_argv, plan_sweep(options), result_dir))
    return starts


def describe(starts: list[Start]) -> str:
    lines = []
    for i, start in enumerate(starts, start=1):
        lines.append(f"start {i}: source {start.source.upper()} ({start.order} order)")
        lines.append(f"  server: {shell_join(redact_argv(start.serve_argv))}")
        for step in start.steps:
            lines.append(f"  {step.description:<16} {shell_join(redact_urls(step.argv))}")
        lines.append("  then: SIGTERM to the server, wait for it to stop")
    return "\n".join(lines)


def ab_json(starts: list[Start], result_dir: Path) -> str:
    """The plan of `bench ab --dry-run -o json`: every round of every start, with its server."""
    from omni_deploy.bench.runner import step_json
    from omni_deploy.common.output.json_doc import dumps

    rounds = [
        step_json(
            step, start.result_dir, False, source=start.source, start=i, server=redact_argv(start.serve_argv)
        )
        for i, start in enumerate(starts, start=1)
        for step in start.steps
    ]
    return dumps({"dry_run": True, "result_dir": str(result_dir), "steps": rounds})


def run_ab(
    starts: list[Start],
    base_url: str,
    ready_timeout: float,
    result_dir: Path,
    say: Callable[[str], None],
    model: str | None = None,
) -> str:
    """Each start: a fresh server, its sweep, a stop. Returns the report of B against A."""
    from omni_deploy.bench.report import aggregate, as_text, changes
    from omni_deploy.bench.results import read_dir
    from omni_deploy.bench.runner import run_sweep, wait_ready

    address = urllib.parse.urlsplit(base_url)
    for i, start in enumerate(starts, start=1):
        say(f"start {i}/{len(starts)}: source {start.source.upper()} ({start.order})")
        try:  # never measure someone else's server: the port must be free before each start
            check_port_free(address.hostname or "127.0.0.1", address.port or 80)
        except PortInUse as exc:
            raise PortInUse(f"start {i}: {exc}") from None
        # SIGTERM when we die (also of SIGKILL): serve then stops its server, as on Ctrl-C.
        server = subprocess.Popen(start.serve_argv, preexec_fn=die_with_parent(os.getpid(), signal.SIGTERM))
        try:
            if not wait_ready(base_url, ready_timeout, alive=functools.partial(_alive, server)):
                if server.poll() is not None:
                    raise ProcessExited(f"start {i}: the server", exit_code(server.returncode))
                raise ReadinessTimeout(f"start {i}: the server did not become ready")
            served = served_models(base_url)
            if model is not None and (served is None or model not in served):
                listed = ", ".join(served) if served else "no model list"
                raise ProcessExited(
                    f"start {i}: {base_url} serves {listed}, not {model}; the server", EXIT_SERVER_ERROR
                )
            result = run_sweep(start.steps, start.result_dir, say)
            if result.failed is not None:
                raise ProcessExited("vllm bench serve", result.code)
        finally:
            stop(server)
    rows_b = aggregate(read_dir(result_dir / "b").rounds, "B")
    rows_a = aggregate(read_dir(result_dir / "a").rounds, "A", baseline=True)
    return as_text(rows_b + rows_a, changes(rows_b, rows_a))


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None


def stop(proc: subprocess.Popen[bytes], grace: float = 60) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

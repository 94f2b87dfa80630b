"""Execute a sweep: wait for the server, run each round, keep finished rounds on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omni_deploy.bench.protocol import BENCH_ENV, Step
from omni_deploy.bench.results import unfinished
from omni_deploy.common.errors import OmniDeployError, ProcessExited, ReadinessTimeout
from omni_deploy.common.probes import probe_url
from omni_deploy.common.process_tree import die_with_parent, exit_code
from omni_deploy.common.redact import redact_urls


class ResultDirError(OmniDeployError):
    """The results folder cannot be made."""


@dataclass
class SweepResult:
    finished: list[Step] = field(default_factory=list)
    failed: Step | None = None
    code: int = 0  # the failed round's own exit code


def wait_ready(
    base_url: str, timeout: float, alive: Callable[[], bool] | None = None, interval: float = 0.5
) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if alive is not None and not alive():
            return False
        status, _ = probe_url(f"{base_url}/health")
        if status == 200:
            return True
        time.sleep(interval)
    return False


def set_aside(path: Path) -> Path:
    """Rename an unfinished round file out of the way (never deleted: it may be all that is left)."""
    for n in range(1000):
        aside = path.with_name(f"{path.name}.unfinished{n or ''}")
        if not os.path.lexists(aside):
            os.rename(path, aside)
            return aside
    raise ResultDirError(f"{path}: too many unfinished copies beside it; remove them")


def run_sweep(
    steps: list[Step], result_dir: Path, say: Callable[[str], None] = print, quiet_stdout: bool = False
) -> SweepResult:
    """Run the rounds in order; `quiet_stdout` sends the client's output to stderr (stdout is JSON)."""
    result = SweepResult()
    env = {**os.environ, **BENCH_ENV}
    for index, step in enumerate(steps, start=1):
        try:
            (result_dir / f"c{step.concurrency}").mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # --result-dir names a file, a read-only place, a name too long
            raise ResultDirError(
                f"--result-dir {result_dir}: cannot create the folder of C={step.concurrency}: {exc.strerror or exc}"
            ) from None
        target = result_dir / f"c{step.concurrency}" / f"{step.label}.json"
        if target.exists() or target.is_symlink():
            why = unfinished(target)
            if why is None:
                say(f"[{index}/{len(steps)}] {step.description}: {target} exists, kept (not re-run)")
                result.finished.append(step)
                continue
            aside = set_aside(target)
            say(f"[{index}/{len(steps)}] {step.description}: {target} is not a finished round ({why}); "
                f"moved to {aside.name}, running it again")  # fmt: skip
        say(f"[{index}/{len(steps)}] {step.description} ({step.role})")
        proc = subprocess.Popen(
            list(step.argv),
            env=env,
            start_new_session=True,
            stdout=sys.stderr if quiet_stdout else None,
            preexec_fn=die_with_parent(os.getpid(), signal.SIGTERM),  # a round never outlives the sweep
        )
        try:
            code = proc.wait()
        except KeyboardInterrupt:
            try:
                os.killpg(proc.pid, signal.SIGINT)
                proc.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            say(
                f"interrupted during {step.description}; {len(result.finished)} finished round(s) kept in {result_dir}"
            )
            raise
        if code != 0:
            result.failed = step
            result.code = exit_code(code)
            say(f"{step.description}: vllm bench serve exited with {result.code}; stopping the sweep")
            return result
        result.finished.append(step)
    return result


def sweep_server(
    steps: list[Step],
    base_url: str,
    ready_timeout: float,
    result_dir: Path,
    say: Callable[[str], None],
    quiet_stdout: bool = False,
) -> list[Step]:
    """Wait for a running server, then run the sweep; a failed round raises ProcessExited.

    Returns the finished rounds.
    """
    say(f"waiting for {base_url}/health")
    if not wait_ready(base_url, ready_timeout):
        raise ReadinessTimeout(f"{base_url} is not ready after {ready_timeout:g} s")
    result = run_sweep(steps, result_dir, say, quiet_stdout)
    say(f"{len(result.finished)} of {len(steps)} round(s) done; results in {result_dir}")
    if result.failed is not None:
        raise ProcessExited("vllm bench serve", result.code)
    return result.finished


def stderr_say(message: str) -> None:
    print(f"omni-deploy: {message}", file=sys.stderr, flush=True)


def timed(say: Callable[[str], None]) -> Callable[[str], None]:
    """`say` with the time since the sweep began, so a long sweep shows how far it is."""
    started = time.monotonic()

    def timed_say(message: str) -> None:
        minutes, seconds = divmod(int(time.monotonic() - started), 60)
        say(f"{message}  [{minutes}:{seconds:02d} elapsed]")

    return timed_say


def step_json(step: Step, result_dir: Path, done: bool, **extra: Any) -> dict[str, Any]:
    """One round as `bench run -o json` lists it (docs/json-output.md)."""
    return {
        "description": step.description,
        "role": step.role,
        "concurrency": step.concurrency,
        "argv": redact_urls(step.argv),  # a --base-url may carry a password
        "result": str(result_dir / f"c{step.concurrency}" / f"{step.label}.json"),
        "done": done,
        **extra,
    }


def steps_json(steps: list[Step], result_dir: Path, finished: list[Step], dry_run: bool) -> str:
    from omni_deploy.common.output.json_doc import dumps

    done = {id(step) for step in finished}
    rounds = [step_json(step, result_dir, id(step) in done) for step in steps]
    return dumps({"dry_run": dry_run, "result_dir": str(result_dir), "steps": rounds})

"""Run the server check: one child process, the serving environment's interpreter, many files.

The parent (validate) never imports vllm, vllm_omni or torch. It asks the interpreter whether it
has vllm-omni (package metadata only), and when that release is the target, starts `child.py`
under it once for every file, bounded in time (`timeout_s`) and address space (`memory_gib`,
RLIMIT_AS), with the Hugging Face hub offline. What comes back is plain data (`ServerRun`);
turning it into findings is `locate.py`'s job.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHILD = Path(__file__).with_name("child.py")
AUTO, ON, REQUIRE, OFF = "auto", "on", "require", "off"
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_MEMORY_GIB = 16.0
# What is read back of the child's records (a few hundred bytes a file) and the most any file it
# writes may grow (RLIMIT_FSIZE): a named interpreter that floods is cut short, not read whole.
MAX_RECORDS_BYTES = 64 * 1024 * 1024
MAX_RECORD_LINES = 2000  # records read back, beyond those of the jobs themselves
MAX_FIELD = 4000  # characters of one string in a record (a refusal message)
MAX_ITEMS = 200  # entries of one list or mapping in a record
MAX_WRITE_BYTES = 1024 * 1024 * 1024
# An error of these types means the serving environment lacks something the pipeline's code
# imports (the CI tier has no diffusers, for one): the file is undecided, not refused.
_ENVIRONMENT_ERRORS = ("ModuleNotFoundError", "ImportError")


@dataclass(frozen=True)
class Refusal:
    """One exception vllm-omni's own code raised for a file."""

    platform: str
    step: str  # load | pipeline | typed_config | transfer_config
    type: str
    message: str
    where: str | None  # upstream file:line that raised, relative to site-packages
    swallowed: bool = False  # upstream catches it, logs a warning and goes on without connectors


@dataclass
class FileVerdict:
    refusals: list[Refusal] = field(default_factory=list)
    undecided: str | None = None  # why the check could not decide this file
    pipeline: str | None = None
    platforms: list[str] = field(default_factory=list)

    @property
    def decided(self) -> bool:
        return self.undecided is None


@dataclass
class ServerRun:
    ran: bool
    reason: str  # in words: what ran, or why it did not
    interpreter: str | None = None
    version: str | None = None
    path: str | None = None  # typed_config | merge_pipeline_deploy
    seconds: float = 0.0
    verdicts: dict[str, FileVerdict] = field(default_factory=dict)  # by the file as given
    registry_imported: bool | None = None  # the child's word: was the whole pipeline registry imported?

    def as_dict(self) -> dict[str, Any]:
        return {
            "ran": self.ran,
            "reason": self.reason,
            "interpreter": self.interpreter,
            "vllm_omni": self.version,
            "path": self.path,
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class Job:
    name: str  # the file as the user named it
    file: Path
    platforms: tuple[str, ...]
    pipeline: str | None
    model: str | None = None


def interpreter_version(python: str, timeout_s: float = 30.0) -> tuple[str | None, str | None]:
    """(vllm-omni version, None) for `python`, or (None, why not); reads package metadata only."""
    # Not resolved: every virtualenv's python links to the same binary, with another site-packages.
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        from omni_deploy.common.bundled import installed_version, installed_version_problem

        version = installed_version("vllm-omni")
        problem = None if version else installed_version_problem("vllm-omni")
        if problem is not None:
            return None, f"the installed vllm-omni's metadata gives {problem}"
        return (version, None) if version else (None, f"vllm-omni is not installed for {python}")

    probe = (
        "import importlib.metadata as m\n"
        "try:\n print(m.version('vllm-omni'))\n"
        "except m.PackageNotFoundError:\n print('')\n"
    )
    from omni_deploy.common import guarded

    try:  # a program named by --server-python: its answer is capped in size and time
        done = guarded.capture([python, "-I", "-c", probe], timeout=timeout_s, limit=64 * 1024)
    except OSError as exc:
        return None, f"cannot run {python}: {exc}"
    if done.returncode is None:
        return None, f"{python} {done.why_stopped} when asked for its vllm-omni version"
    version = done.stdout.strip()
    if done.returncode != 0:
        return None, f"{python} exited with {done.returncode}: {done.stderr.strip()[-200:]}"
    from omni_deploy.common.numbers import version_problem

    problem = version_problem(version)
    if problem is not None:  # an answer no version parser should see (5,000 digits)
        return None, f"{python} answered the version probe with {problem}"
    return (version, None) if version else (None, f"vllm-omni is not installed for {python}")


def _limits(memory_gib: float) -> Any:
    def apply() -> None:
        import resource

        cap = int(memory_gib * 2**30)
        # A lower hard limit already in force is bound enough.
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_WRITE_BYTES, MAX_WRITE_BYTES))

    return apply


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # No network: a config check must not download a model, a tokenizer or a config.
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "WARNING",
                "PYTHONDONTWRITEBYTECODE": "1", "TOKENIZERS_PARALLELISM": "false"})  # fmt: skip
    return env


def run_child(
    python: str, jobs: list[Job], timeout_s: float, memory_gib: float
) -> tuple[list[dict[str, Any]], str, int | None, bool]:
    """(records, stderr tail, exit code, timed out) of one child over `jobs`.

    Through omni_deploy/common/children.py: the child runs in a process group of its own that is ended,
    with anything it forked, on every exit path and on a SIGTERM of ours; its stdout is bounded
    in bytes and lines before it is kept, and each record's strings are cut to MAX_FIELD chars."""
    import tempfile

    from omni_deploy.common import children

    request = {
        "jobs": [
            {"id": i, "file": str(job.file), "platforms": list(job.platforms), "pipeline": job.pipeline,
             "model": job.model}
            for i, job in enumerate(jobs)
        ]
    }  # fmt: skip
    ran = children.run(
        [python, str(CHILD)],
        stdin=json.dumps(request).encode(),
        env=_child_env(),
        cwd=tempfile.gettempdir(),
        timeout=timeout_s,
        max_bytes=MAX_RECORDS_BYTES,
        max_lines=MAX_RECORD_LINES + 8 * len(jobs),
        preexec=_limits(memory_gib),
    )
    records = []
    for line in ran.stdout.decode("utf-8", "replace").splitlines():
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict):
            records.append(_bounded(record))
    tail = ran.stderr_tail.decode("utf-8", "replace")
    if ran.why_stopped is not None and not ran.why_stopped.startswith("timed out"):
        tail += f"\nthe check's child was stopped: it {ran.why_stopped}"
    timed_out = bool(ran.why_stopped and ran.why_stopped.startswith("timed out"))
    return records, tail, ran.returncode, timed_out


def _bounded(value: Any, depth: int = 0) -> Any:
    """A record with every string cut to MAX_FIELD characters and every list to MAX_ITEMS items
    (a 4 MB refusal message is not worth 4 MB of findings, nor 150,000 swallowed errors)."""
    if isinstance(value, str):
        return value if len(value) <= MAX_FIELD else value[:MAX_FIELD] + f"... ({len(value)} characters)"
    if depth > 8:
        return None
    if isinstance(value, dict):
        return {str(k)[:200]: _bounded(v, depth + 1) for k, v in list(value.items())[:MAX_ITEMS]}
    if isinstance(value, list):
        return [_bounded(v, depth + 1) for v in value[:MAX_ITEMS]]
    return value


def _resolve(python: str) -> str:
    """An absolute path (the child runs in another folder); a bare name is looked up on PATH."""
    if os.sep not in python:
        import shutil

        return shutil.which(python) or python
    return os.path.abspath(python)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][-300:] if lines else "no output"


def check(
    jobs: list[Job],
    *,
    python: str | None,
    target_version: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_gib: float = DEFAULT_MEMORY_GIB,
) -> ServerRun:
    """Run the server check over `jobs`; never raises for what the environment lacks."""
    from omni_deploy.knowledge.versions import MAIN, parts

    python = _resolve(python or sys.executable)
    version, why_not = interpreter_version(python)
    if version is None:
        return ServerRun(False, why_not or "vllm-omni is not importable", python)
    if target_version not in (MAIN, "installed") and parts(target_version)[:2] != parts(version)[:2]:
        return ServerRun(
            False,
            f"the target is vllm-omni {target_version}; {python} has vllm-omni {version}",
            python,
            version,
        )
    if not jobs:
        return ServerRun(False, "no file to check (files read from stdin are not checked)", python, version)
    started = time.monotonic()
    records, tail, code, timed_out = run_child(python, jobs, timeout_s, memory_gib)
    seconds = time.monotonic() - started
    hello = next((r for r in records if r.get("kind") == "hello"), None)
    if hello is None or "error" in hello:
        detail = hello["error"] if hello and "error" in hello else _last_line(tail)
        reason = (
            f"timed out after {timeout_s:.0f} s" if timed_out else f"could not import vllm-omni: {detail}"
        )
        return ServerRun(False, reason, python, version, seconds=seconds)
    verdicts = _verdicts(jobs, records)
    finished = sum(1 for v in verdicts.values() if v.undecided != _UNFINISHED)
    run = ServerRun(True, "", python, str(hello.get("vllm_omni")), str(hello.get("path")), seconds, verdicts)
    done_record = next((r for r in records if r.get("kind") == "done"), None)
    done = done_record is not None
    run.registry_imported = bool(done_record.get("registry_imported")) if done_record else None
    if not done:
        why = f"timed out after {timeout_s:.0f} s" if timed_out else f"exited with {code}: {_last_line(tail)}"
        for verdict in verdicts.values():
            if verdict.undecided == _UNFINISHED:
                verdict.undecided = f"the server check stopped before this file ({why})"
        run.reason = f"{finished} of {len(jobs)} file(s) checked; {why}"
    return run


_UNFINISHED = "unfinished"


def _verdicts(jobs: list[Job], records: list[dict[str, Any]]) -> dict[str, FileVerdict]:
    verdicts = {job.name: FileVerdict() for job in jobs}
    seen: dict[str, set[str]] = {job.name: set() for job in jobs}
    for record in records:
        index = record.get("id")
        if record.get("kind") != "job" or not isinstance(index, int) or not 0 <= index < len(jobs):
            continue
        job = jobs[index]
        verdict = verdicts[job.name]
        platform = str(record.get("platform"))
        seen[job.name].add(platform)
        verdict.platforms.append(platform)
        verdict.pipeline = record.get("pipeline") or verdict.pipeline
        error = record.get("error")
        if isinstance(error, dict):
            if error.get("type") in _ENVIRONMENT_ERRORS or error.get("type") == "LookupError":
                verdict.undecided = verdict.undecided or _undecided(error)
            else:
                verdict.refusals.append(_refusal(platform, error, swallowed=False))
        for swallowed in record.get("swallowed") or []:
            if isinstance(swallowed, dict):
                verdict.refusals.append(_refusal(platform, swallowed, swallowed=True))
    for job in jobs:
        if verdicts[job.name].undecided is None and not seen[job.name] >= set(job.platforms):
            verdicts[job.name].undecided = _UNFINISHED
    return verdicts


def _undecided(error: dict[str, Any]) -> str:
    message = str(error.get("message", ""))
    if error.get("type") == "LookupError":
        return message
    return (
        f"the serving environment cannot import what this pipeline's code needs ({message}); "
        "install it there to have this file checked"
    )


def _refusal(platform: str, raw: dict[str, Any], swallowed: bool) -> Refusal:
    return Refusal(
        platform,
        str(raw.get("step", "")),
        str(raw.get("type", "Exception")),
        str(raw.get("message", "")),
        str(raw["where"]) if raw.get("where") else None,
        swallowed,
    )

"""What each patched process says about its speaker path: one report line, one report file.

The line goes through a `vllm.` logger (the only tree vLLM configures) at INFO, so it is in the
server log unless vLLM's logging hides INFO (VLLM_LOGGING_LEVEL=WARNING, VLLM_CONFIGURE_LOGGING=0).
The file does not depend on logging: where OMNI_DEPLOY_SPK_REPORT_DIR names a directory (serve sets
it to the run directory's `speaker/`), each process writes one JSON file per patched component
there, and rewrites it when the component's backend changes (the encoder retired for good).
`omni-deploy serve` and `explain --probe` read those files (omni_deploy.speaker_backend.server_report).

Standard library only (and omni_deploy.common.atomic_write, itself standard library only); nothing
here may raise into vLLM.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from omni_deploy.common.atomic_write import write_atomic
from omni_deploy.integrations.speaker_rules import ENV_REPORT_DIR, LOG_PREFIX, LOGGER_NAME, REPORT_MARK

WARNING_PREFIX = f"{LOG_PREFIX} "
REPORT_SCHEMA = 1
_warned: set[str] = set()
_lock = threading.Lock()


def logger() -> logging.Logger:
    try:
        from vllm.logger import init_logger  # configures the `vllm` tree on first import

        return init_logger(LOGGER_NAME)
    except Exception:  # vllm missing or its logging changed: the name still sits under `vllm`
        return logging.getLogger(LOGGER_NAME)


def warn(message: str, *args: Any) -> None:
    logger().warning(WARNING_PREFIX + message, *args)


def warn_once(key: str, message: str, *args: Any) -> None:
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    warn(message, *args)


@dataclass
class Outcome:
    """What one patched component (a Code2Wav stage, a processor, an extractor) got."""

    backend: str
    device: str
    why: str
    model: str = "minicpmo_4_5"
    stage: str = "?"  # the stage id, or "processor" for a processor in the API server
    replaced: str = "nothing"
    tf32: str = "n/a"
    kernels: str = "n/a"
    onnx: str = "n/a"
    vllm_omni: str = "?"
    warnings: list[str] = field(default_factory=list)
    retired: str | None = None  # why the encoder was retired for good, once it was
    warmup_s: float | None = None  # the encoder's warm-up embedding before the first request
    prepare: str = "n/a"  # new reference voices (issue 26): "batched", or "per-voice(<why>)"
    layout: str = "n/a"  # the shape of vllm-omni's code the patch recognised (targets.Layout)
    # references vllm-omni prepares at request arrival (0.32): "batched" (through the plugin's
    # pass), "off" (token2wav_ref_prefetch: false), "vllm-omni(<why>)"; "n/a": no prefetch there
    prefetch: str = "n/a"


def startup_fallback(why: str, prepare: str = "n/a") -> str | None:
    """For serve, `explain --probe` and the docs: when a report's decided-by (`why`, with spaces or
    with the line's underscores) or prepare field says the CUDA fast path fell back at start-up,
    what happened and what to do; None when it did not."""
    text = why.replace("_", " ")
    if "CUDA error" in text:
        return (
            f"the CUDA CAM++ fast path fell back at start-up with a CUDA error ({text}): the stage kept vllm-omni's "
            "ONNX Runtime session, but this process's CUDA context may be unusable. Restart the stage with "
            "token2wav_device_spk: false (or OMNI_DEPLOY_SPK_BACKEND=cpu-onnxruntime) and report the stage's log "
            "(its 'omni-deploy CAM++:' WARNING names the failing step)"
        )
    if text.startswith("fallback") and "warm-up" in text:
        return (
            f"the CUDA CAM++ fast path fell back at start-up ({text}): speaker embeddings run on ONNX Runtime on "
            "the CPU, so each new voice costs more. The stage's 'omni-deploy CAM++:' WARNING says why; "
            "`omni-deploy spk parity --onnx CAMPPLUS_ONNX` compares the encoder with ONNX Runtime on this host"
        )
    if text.startswith("fallback") and "loading the encoder" in text:
        return (
            f"the CUDA CAM++ fast path fell back at start-up ({text}): omni-deploy's encoder could not read "
            "campplus.onnx; speaker embeddings run on ONNX Runtime on the CPU. `omni-deploy spk parity --onnx` on the "
            "model's campplus.onnx says what it rejects"
        )
    if text.startswith("error"):
        return (
            f"the plugin's take-over failed at start-up ({text}): the stage runs as vllm-omni built it. Its "
            "'omni-deploy CAM++:' WARNING has the exception; report it with the vllm-omni version"
        )
    if "warm-up failed" in prepare.replace("_", " "):
        return (
            "the batched reference preparation failed its start-up warm-up: vllm-omni prepares each new voice "
            "itself (slower for new voices). The stage's 'omni-deploy CAM++:' WARNING says why; "
            "token2wav_device_prepare: false makes this the configured path"
        )
    return None


def token(text: str) -> str:
    """One space-free field of the report line: 'token2wav_device_spk (default)' ->
    'token2wav_device_spk(default)'."""
    return text.replace(" (", "(").replace(" ", "_")


def report(outcome: Outcome) -> None:
    """The INFO line (serve parses its key=value fields) and, where asked for, the report file."""
    logger().info(
        "%s stage=%s backend=%s device=%s tf32=%s kernels=%s onnx=%s replaced=%s decided-by=%s model=%s "
        "vllm-omni=%s prepare=%s layout=%s prefetch=%s",
        REPORT_MARK, token(outcome.stage), outcome.backend, outcome.device, outcome.tf32, outcome.kernels,
        outcome.onnx, outcome.replaced, token(outcome.why), outcome.model, token(outcome.vllm_omni), token(outcome.prepare),
        token(outcome.layout), token(outcome.prefetch),
    )  # fmt: skip
    write_file(outcome)


def file_name(outcome: Outcome) -> str:
    return f"{outcome.model}-{token(outcome.stage)}-{os.getpid()}.json"


def write_file(outcome: Outcome) -> str | None:
    """Write (or rewrite) this component's report file; returns its path, None when not asked for
    or when it could not be written (one WARNING says why)."""
    directory = os.environ.get(ENV_REPORT_DIR)
    if not directory:
        return None
    record = {
        "schema": REPORT_SCHEMA,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **asdict(outcome),
    }
    path = os.path.join(directory, file_name(outcome))
    try:
        os.makedirs(directory, exist_ok=True)
        # Written whole, then renamed: a reader never sees half a file. 0600 as before (tempfile's
        # mode); the temporary name ends in .partial, so read_files never takes it for a report.
        write_atomic(
            path, json.dumps(record, indent=1).encode("utf-8"), link="replace", mode=0o600, fsync=False
        )
    except OSError as exc:
        warn_once(f"report-file:{directory}", "cannot write the report file in %s=%s (%s); the report line in the "
                  "log is all there is", ENV_REPORT_DIR, directory, exc)  # fmt: skip
        return None
    return path


MAX_REPORT_BYTES = 1024 * 1024  # a report is a few hundred bytes
MAX_REPORT_FILES = 1000  # one per component and process


def _read_regular(path: str) -> str:
    """A report file's text: a regular file within MAX_REPORT_BYTES, opened without blocking (a FIFO
    named *.json would hang the reader; a link to /dev/zero never ends); OSError says why not."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        data = os.read(fd, MAX_REPORT_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_REPORT_BYTES:
        raise OSError(f"{path} has more than {MAX_REPORT_BYTES} bytes")
    return data.decode("utf-8")


def read_files(directory: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The report records in `directory` (one per component and process, newest state), and what
    could not be read there. For serve and `explain --probe`."""
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".json") and not n.startswith("."))
    except OSError as exc:
        return [], [f"cannot list {directory}: {exc.strerror or exc}"]
    for name in names[:MAX_REPORT_FILES]:
        try:
            record = json.loads(_read_regular(os.path.join(directory, name)))
        except (OSError, ValueError, RecursionError) as exc:
            problems.append(f"cannot read {name}: {exc}")
            continue
        if isinstance(record, dict) and isinstance(record.get("backend"), str):
            records.append(record)
        else:
            problems.append(f"{name} is not a speaker report")
    return records, problems

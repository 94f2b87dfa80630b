"""Run a data-driven example file the way its `# options:` header asks."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omni_deploy.knowledge.versions import RELEASED
from omni_deploy.validate.context import Options, model_shape_from_config
from omni_deploy.validate.runner import FileReport, validate_file

OPTIONS = re.compile(r"^# options: (.*)$")
Setter = Callable[[Options, str, Path], None]


def _platform(options: Options, value: str, _: Path) -> None:
    options.platforms = (*(options.platforms or ()), value)


def _set(name: str, convert: Callable[[str, Path], Any] = lambda value, _: value) -> Setter:
    def setter(options: Options, value: str, path: Path) -> None:
        setattr(options, name, convert(value, path))

    return setter


def _beside(value: str, path: Path) -> Path:
    return (path.parent / value).resolve()


# `# options:` flags -> how each sets validate's Options (a path is taken from the example's folder).
SETTERS: dict[str, Setter] = {
    "--platform": _platform,
    "--target-version": _set("target_version"),
    "--gpu-memory-gib": _set("gpu_memory_gib", lambda v, _: float(v)),
    "--gpus-per-node": _set("gpus_per_node", lambda v, _: int(v)),
    "--vllm-omni-source": _set("vllm_omni_source", _beside),
    "--server-check": _set("server_check"),
    "--server-python": _set("server_python", lambda v, p: str(_beside(v, p))),
    "--server-timeout": _set("server_timeout_s", lambda v, _: float(v)),
    "--server-memory-gib": _set("server_memory_gib", lambda v, _: float(v)),
    "--model-config": _set("model_shape", lambda v, p: model_shape_from_config(p.parent / v)),
}


def example_options(path: Path) -> Options:
    options = Options(target_version=RELEASED)
    lines = path.read_text().splitlines() if path.is_file() else []
    for line in lines:
        match = OPTIONS.match(line)
        if not match:
            continue
        args = shlex.split(match.group(1))
        for flag, value in zip(args[::2], args[1::2], strict=True):
            if flag not in SETTERS:
                raise AssertionError(f"{path.name}: unknown option {flag}")
            SETTERS[flag](options, value, path)
    return options


def run_example(path: Path) -> FileReport:
    return validate_file(str(path), example_options(path))

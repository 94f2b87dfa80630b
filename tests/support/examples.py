"""Run a data-driven example file the way its `# options:` header asks."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from omni_deploy.knowledge.versions import RELEASED
from omni_deploy.validate.context import Options, model_shape_from_config
from omni_deploy.validate.runner import FileReport, validate_file

OPTIONS = re.compile(r"^# options: (.*)$")


def example_options(path: Path) -> Options:
    options = Options(target_version=RELEASED)
    lines = path.read_text().splitlines() if path.is_file() else []
    for line in lines:
        match = OPTIONS.match(line)
        if not match:
            continue
        args = shlex.split(match.group(1))
        for flag, value in zip(args[::2], args[1::2], strict=True):
            if flag == "--platform":
                options.platforms = (*(options.platforms or ()), value)
            elif flag == "--target-version":
                options.target_version = value
            elif flag == "--gpu-memory-gib":
                options.gpu_memory_gib = float(value)
            elif flag == "--gpus-per-node":
                options.gpus_per_node = int(value)
            elif flag == "--vllm-omni-source":
                options.vllm_omni_source = (path.parent / value).resolve()
            elif flag == "--server-check":
                options.server_check = value
            elif flag == "--server-python":
                options.server_python = str((path.parent / value).resolve())
            elif flag == "--server-timeout":
                options.server_timeout_s = float(value)
            elif flag == "--server-memory-gib":
                options.server_memory_gib = float(value)
            elif flag == "--model-config":
                options.model_shape = model_shape_from_config(path.parent / value)
            else:
                raise AssertionError(f"{path.name}: unknown option {flag}")
    return options


def run_example(path: Path) -> FileReport:
    return validate_file(str(path), example_options(path))

"""validate's options as an example file's `# options:` lines give them.

The pages of the finding codes (validate/rules.py) and the data-driven cases under tests/data/
start with `# options: --target-version 0.28.0` and the like; this is the one reader of those lines.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omni_deploy.knowledge.versions import RELEASED
from omni_deploy.validate.context import Options, model_shape_from_config

OPTIONS = re.compile(r"^# options: (.*)$")
Setter = Callable[[Options, str, Path], None]


def _platform(options: Options, value: str, _: Path) -> None:
    options.platforms = (*(options.platforms or ()), value)


def _set(name: str, convert: Callable[[str, Path], Any] = lambda value, _: value) -> Setter:
    def setter(options: Options, value: str, folder: Path) -> None:
        setattr(options, name, convert(value, folder))

    return setter


def _beside(value: str, folder: Path) -> Path:
    return (folder / value).resolve()


# `# options:` flags -> how each sets validate's Options (a path is taken from the example's folder).
SETTERS: dict[str, Setter] = {
    "--platform": _platform,
    "--target-version": _set("target_version"),
    "--gpu-memory-gib": _set("gpu_memory_gib", lambda v, _: float(v)),
    "--gpus-per-node": _set("gpus_per_node", lambda v, _: int(v)),
    "--vllm-omni-source": _set("vllm_omni_source", _beside),
    "--server-check": _set("server_check"),
    "--server-python": _set("server_python", lambda v, f: str(_beside(v, f))),
    "--server-timeout": _set("server_timeout_s", lambda v, _: float(v)),
    "--server-memory-gib": _set("server_memory_gib", lambda v, _: float(v)),
    "--model-config": _set("model_shape", lambda v, f: model_shape_from_config(f / v)),
}
# The flags whose value names a file beside the example (a page's example can only show those).
NAMES_A_FILE = frozenset({"--vllm-omni-source", "--server-python", "--model-config"})


def option_flags(text: str) -> list[tuple[str, str]]:
    """The (flag, value) pairs of the text's `# options:` lines, in order."""
    pairs: list[tuple[str, str]] = []
    for line in text.splitlines():
        match = OPTIONS.match(line)
        if match:
            args = shlex.split(match.group(1))
            pairs += list(zip(args[::2], args[1::2], strict=True))
    return pairs


def example_options(text: str, folder: Path, name: str = "example") -> Options:
    """Options(target_version=RELEASED), then what the `# options:` lines set."""
    options = Options(target_version=RELEASED)
    for flag, value in option_flags(text):
        if flag not in SETTERS:
            raise ValueError(f"{name}: unknown option {flag}")
        SETTERS[flag](options, value, folder)
    return options

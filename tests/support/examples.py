"""Run a data-driven example file the way its `# options:` header asks."""

from __future__ import annotations

from pathlib import Path

from omni_deploy.validate import example_options as reader
from omni_deploy.validate.context import Options
from omni_deploy.validate.runner import FileReport, validate_file


def example_options(path: Path) -> Options:
    text = path.read_text() if path.is_file() else ""
    try:
        return reader.example_options(text, path.parent, path.name)
    except ValueError as exc:
        raise AssertionError(str(exc)) from None


def run_example(path: Path) -> FileReport:
    return validate_file(str(path), example_options(path))

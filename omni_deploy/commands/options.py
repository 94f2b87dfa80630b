"""Helpers shared by several commands."""

from __future__ import annotations

from omni_deploy.bundled import default_deploy_file


def default_file_name(file: str | None) -> str:
    """FILE as given, else the bundled MiniCPM-o 4.5 turn profile."""
    return file if file is not None else str(default_deploy_file())

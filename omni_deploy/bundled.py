"""Where bundled files live: the project's own data and the installed vllm-omni's deploy folder.

Nothing here imports vllm_omni: `find_spec` on a top-level name locates the package without
running it, and versions come from package metadata.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_DEPLOY_NAME = "minicpmo_4_5_turn.yaml"


def project_data_dir(name: str) -> Path:
    """A data folder shipped with omni-deploy: inside the wheel, or at the top of a checkout."""
    packaged = _PACKAGE_DIR / "_bundled" / name
    if packaged.is_dir():
        return packaged
    return _PACKAGE_DIR.parent / name


def project_deploy_dir() -> Path:
    return project_data_dir("deploy")


def default_deploy_file() -> Path:
    return project_deploy_dir() / DEFAULT_DEPLOY_NAME


def deploy_file_name(file: str | None) -> str:
    """FILE as the user gave it, else the bundled MiniCPM-o 4.5 turn profile."""
    return file if file is not None else str(default_deploy_file())


def installed_vllm_omni_dir() -> Path | None:
    try:
        spec = importlib.util.find_spec("vllm_omni")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def vllm_omni_deploy_dir() -> Path | None:
    root = installed_vllm_omni_dir()
    if root is None or not (root / "deploy").is_dir():
        return None
    return root / "deploy"


def installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def bundled_candidates(name: str) -> list[Path]:
    """Bundled files called `name`: the project's deploy/ first, then vllm-omni's."""
    found = []
    for folder in (project_deploy_dir(), vllm_omni_deploy_dir()):
        if folder is not None and (folder / name).is_file():
            found.append(folder / name)
    return found

"""Where bundled files live: the project's own data and the installed vllm-omni's deploy folder.

Nothing here imports vllm_omni: `find_spec` on a top-level name locates the package without
running it, and versions come from package metadata, read from the *.dist-info folders on
sys.path directly (importing importlib.metadata cost validate's start-up about 30 ms).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

from omni_deploy.common.numbers import version_problem

_PACKAGE_DIR = Path(__file__).resolve().parents[1]
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


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def installed_version(distribution: str) -> str | None:
    """The version of an installed distribution, as importlib.metadata.version finds it: the first
    `NAME-VERSION.dist-info` (or `NAME.egg-info`) folder on sys.path whose name matches, its
    METADATA (PKG-INFO) `Version:` line. None when it is not installed, and None too when that
    version is one no parser should see (numbers.version_problem: a hostile METADATA's 5,000-digit
    version made int() raise in every reader): `installed_version_problem` says why."""
    found = _raw_installed_version(distribution)
    if found is None or version_problem(found) is not None:
        return None
    return found


def installed_version_problem(distribution: str) -> str | None:
    """Why `installed_version` set the installed distribution's version aside, or None."""
    found = _raw_installed_version(distribution)
    return None if found is None else version_problem(found)


def _raw_installed_version(distribution: str) -> str | None:
    wanted = _normal(distribution)
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue  # a zip file or a folder that is gone: nothing installed there to read
        for name in names:
            stem, _, suffix = name.rpartition(".")
            if suffix not in ("dist-info", "egg-info") or _normal(stem.split("-", 1)[0]) != wanted:
                continue
            version = _metadata_version(os.path.join(entry or ".", name))
            if version is not None:
                return version
    return None


# A METADATA's headers are a few dozen short lines; a file of one endless line, or of endless
# headers, costs no more than this to read (an over-long Version line fails version_problem).
_MAX_HEADER_LINE = 4096
_MAX_HEADER_LINES = 10_000
_MAX_HEADER_BYTES = 1024 * 1024  # read of a METADATA: its headers come first


def _metadata_version(folder: str) -> str | None:
    from omni_deploy.common import guarded

    for leaf in ("METADATA", "PKG-INFO"):
        # Non-blocking and regular files only (a FIFO named METADATA must not hang the command).
        data = guarded.head(os.path.join(folder, leaf), _MAX_HEADER_BYTES)
        if data is None:
            continue
        for line in data.decode("utf-8", "replace").splitlines()[:_MAX_HEADER_LINES]:
            line = line[:_MAX_HEADER_LINE]
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip() or None
            if not line.strip():
                break  # the headers end at the first blank line (or the file does)
    return None


def bundled_candidates(name: str) -> list[Path]:
    """Bundled files called `name`: the project's deploy/ first, then vllm-omni's."""
    found = []
    for folder in (project_deploy_dir(), vllm_omni_deploy_dir()):
        if folder is not None and (folder / name).is_file():
            found.append(folder / name)
    return found


def _release_cache() -> Path:
    """Where `python -m omni_deploy.knowledge.generate` keeps the unpacked release wheels."""
    return Path(os.environ.get("OMNI_DEPLOY_TEST_CACHE", _PACKAGE_DIR.parent / ".cache"))


def release_deploy_dir(version: str) -> Path | None:
    """The deploy folder vllm-omni `version` itself ships: the installed package's when that is
    the version, else the release's unpacked wheel in the knowledge cache; None where neither is here."""
    root = installed_vllm_omni_dir()
    if root is not None and (root / "deploy").is_dir() and installed_version("vllm-omni") == version:
        return root / "deploy"
    cached = _release_cache() / f"vllm_omni-{version}" / "vllm_omni" / "deploy"
    return cached if cached.is_dir() else None


def is_vllm_omni_bundled(path: Path) -> bool:
    """Whether `path` is a file of a vllm-omni deploy folder (…/vllm_omni/deploy/NAME)."""
    return path.parent.name == "deploy" and path.parent.parent.name == "vllm_omni"

"""How to install one of omni-deploy's extras, said in a way that works where this copy came from.

omni-deploy is not on a package index, so `pip install 'omni-deploy[speaker]'` fails. Run from a
checkout (or an editable install of one) the hint names that checkout; installed from a wheel it
names the extra's own requirements, read from the installed package's metadata.
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[2]


def _requirements(extra: str) -> list[str]:
    try:
        requires = importlib.metadata.requires("omni-deploy") or []
    except importlib.metadata.PackageNotFoundError:
        return []
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    return [r.split(";", 1)[0].strip() for r in requires if marker.search(r)]


def install_hint(extra: str) -> str:
    """A pip command line that installs the `extra` of this omni-deploy."""
    if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "omni_deploy").is_dir():
        return f"pip install {shlex.quote(f'{_CHECKOUT}[{extra}]')}"
    requirements = _requirements(extra)
    if requirements:
        return "pip install " + " ".join(shlex.quote(r) for r in requirements)
    return f"install omni-deploy's '{extra}' extra from its source checkout"

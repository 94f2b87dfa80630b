"""vllm-omni versions as the knowledge table names them.

RELEASES holds every vllm-omni on PyPI that ships deploy files and that omni-deploy has knowledge of,
pre-releases included (0.31.0rc1, 0.32.0rc1); RELEASED is the newest final release among them, the
target when none is named and none is installed. Keys seen only on vllm-omni main after the newest
release are marked "main": a target of "main", or any version after RELEASES[-1], reads them.
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from omni_deploy.common.bundled import installed_version

# Releases that ship deploy YAMLs, oldest first: the ones `omni_deploy.knowledge.generate` reads
# (0.18.0 and older have no deploy/ folder). Add the next release here, then regenerate.
RELEASES: tuple[str, ...] = (
    "0.20.0",
    "0.22.0",
    "0.24.0",
    "0.26.0",
    "0.28.0",
    "0.30.0",
    "0.31.0rc1",
    "0.32.0rc1",
)


def is_final(version: str) -> bool:
    """A final release: "0.30.0", not "0.32.0rc1" or "0.31.0.dev3"."""
    return re.fullmatch(r"\d+(\.\d+)*", version) is not None


RELEASED = [v for v in RELEASES if is_final(v)][-1]
MAIN = "main"


def _parts(version: str) -> tuple[int, ...]:
    numbers = re.findall(r"\d+", version.split("+")[0])
    return tuple(int(n) for n in numbers[:3]) or (0,)


def parts(version: str) -> tuple[int, ...]:
    """A version's release numbers: "0.30.0rc1" -> (0, 30, 0). For major.minor comparisons only;
    ordering goes by `order`, which knows that 0.32.0rc1 comes before 0.32.0."""
    return _parts(version)


def order(version: str) -> Version:
    """A version's place in PEP 440 order: 0.31.0.dev5 < 0.31.0rc1 < 0.31.0 < 0.31.1."""
    try:
        return Version(version)
    except InvalidVersion:  # a local build's odd string: its numbers, as a final release
        return Version(".".join(str(n) for n in _parts(version)))


def is_newer_than_known(version: str) -> bool:
    """A version after the newest release omni-deploy has knowledge of (e.g. 0.32.0 after 0.32.0rc1)."""
    return version == MAIN or order(version) > order(RELEASES[-1])


def reads(since: str, target: str, until: str | None = None) -> bool:
    """Whether a key introduced in `since` (and removed in `until`, if any) is read by `target`."""
    if until is not None and (target == MAIN or order(target) >= order(until)):
        return False
    if since == MAIN:
        return is_newer_than_known(target)
    return target == MAIN or order(target) >= order(since)


def default_target_version() -> str:
    """The vllm-omni a file is checked against when none is named: the installed one, else RELEASED."""
    return installed_version("vllm-omni") or RELEASED


def major_minor(version: str) -> tuple[int, ...]:
    return _parts(version)[:2]

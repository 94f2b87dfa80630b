"""Installed versions read from package metadata on sys.path, as importlib.metadata reads them."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest

from omni_deploy.common.bundled import installed_version, installed_version_problem


def test_every_installed_distribution_has_the_version_importlib_metadata_gives() -> None:
    names = {d.metadata["Name"] for d in importlib.metadata.distributions() if d.metadata["Name"]}
    assert len(names) > 20
    for name in sorted(names):
        assert installed_version(name) == importlib.metadata.version(name), name
    assert installed_version("surely-not-installed-here") is None


def test_dist_info_and_egg_info_found_by_normalised_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = tmp_path / "vllm_omni-0.29.1.dist-info"
    wheel.mkdir()
    (wheel / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-omni\nVersion: 0.29.1\n\nVersion: 9\n")
    develop = tmp_path / "Some.Tool.egg-info"
    develop.mkdir()
    (develop / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: some-tool\nVersion: 2.0.dev1\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "missing"), str(tmp_path)])
    assert installed_version("vllm-omni") == installed_version("VLLM_Omni") == "0.29.1"
    assert installed_version("some-tool") == "2.0.dev1"


def _dist_info(root: Path, folder: str, metadata: str) -> None:
    (root / folder).mkdir()
    (root / folder / "METADATA").write_text(metadata)


def test_a_hostile_version_is_unknown_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A dist-info METADATA nobody vetted: 5,000 digits made int() raise in every version reader
    # (1,000 here keep the line whole; an endless line is the next test's).
    _dist_info(
        tmp_path, "vllm-9.dist-info", "Metadata-Version: 2.1\nName: vllm\nVersion: 0." + "9" * 1000 + "\n"
    )
    _dist_info(
        tmp_path, "vllm_omni-9.dist-info", "Metadata-Version: 2.1\nName: vllm-omni\nVersion: 0.9\x1b[2J\n"
    )
    _dist_info(tmp_path, "fine-1.dist-info", "Metadata-Version: 2.1\nName: fine\nVersion: 1.2.3\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert installed_version("vllm") is None
    assert (
        installed_version_problem("vllm") == f"a version of {len('0.' + '9' * 1000)} characters (at most 64)"
    )
    assert installed_version("vllm-omni") is None
    assert installed_version_problem("vllm-omni") == "a version with control characters"
    assert installed_version("fine") == "1.2.3"
    assert installed_version_problem("fine") is None
    assert installed_version_problem("not-installed") is None


def test_an_endless_metadata_line_is_read_only_so_far(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dist_info(tmp_path, "big-1.dist-info", "Version: " + "1" * 3_000_000)  # no newline anywhere
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert installed_version("big") is None
    problem = installed_version_problem("big")
    assert problem is not None and problem.startswith("a version of 4087 characters")

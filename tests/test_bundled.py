"""Installed versions read from package metadata on sys.path, as importlib.metadata reads them."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest

from omni_deploy.bundled import installed_version


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

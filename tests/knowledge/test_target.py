"""Which reads a target version gets: a release's committed data, an installed unreleased tree read
at run time (and cached), or the newest release standing in, said as such."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_deploy.knowledge import target
from omni_deploy.knowledge.versions import RELEASED, RELEASES

TREE = Path(__file__).resolve().parents[1] / "data" / "knowledge" / "unreleased"


def test_every_release_is_in_the_data() -> None:
    assert target.data()["versions"] == list(RELEASES)


def test_release_reads_come_from_that_release() -> None:
    old = target.resolve_target("0.22.0")
    assert old.exact and old.basis == "0.22.0"
    assert old.reads("stage", "stage_id") is not None
    assert old.reads("top", "session_mode") is None  # read from 0.26.0 on
    assert old.legacy_stage_args is not None  # 0.22 still routes stage_args files to its legacy loader
    new = target.resolve_target("0.30.0")
    assert new.reads("top", "stage_args").refused  # type: ignore[union-attr]
    assert new.legacy_stage_args is None


def test_patch_release_uses_its_minor() -> None:
    assert target.resolve_target("0.28.1").basis == "0.28.0"


def test_unknown_target_without_code_stands_in_and_says_so() -> None:
    reads = target.resolve_target("main")
    assert not reads.exact and reads.basis == RELEASES[-1]  # the newest release known, pre-release or not
    assert "standing in for main" in reads.source
    assert reads.reads("code2wav", "token2wav_device_spk") is None  # never claimed without code


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "omni-deploy"


def test_installed_unreleased_tree_is_read_and_cached(cache_home: Path) -> None:
    reads = target.resolve_target("0.31.0.dev5", installed="0.31.0.dev5", installed_root=TREE)
    assert reads.exact and "read now" in reads.source
    assert reads.reads("top", "speech_cache") is not None
    tf32 = reads.reads("code2wav", "token2wav_allow_tf32")
    assert tf32 is not None and tf32.has_default and tf32.default is False
    cached = list(cache_home.glob("reads-*.json"))
    assert len(cached) == 1
    again = target.resolve_target("main", installed="0.31.0.dev5", installed_root=TREE)
    assert again.keys("code2wav") == reads.keys("code2wav")


def test_describe_versions() -> None:
    assert target.describe_versions([]) == "no release"
    assert target.describe_versions(["0.26.0", "0.28.0", "0.30.0"]) == "0.26.0-0.30.0"
    assert target.describe_versions(["0.20.0", "0.24.0"]) == "0.20.0, 0.24.0"
    assert target.versions_reading("code2wav", "ref_audio_max_seconds") == [
        "0.30.0",
        "0.31.0rc1",
        "0.32.0rc1",
    ]
    assert target.describe_versions(["0.30.0", "0.31.0rc1", "0.32.0rc1"]) == "0.30.0-0.32.0rc1"
    assert target.versions_reading("code2wav", "micro_batch_size") == ["0.31.0rc1", "0.32.0rc1"]


def test_a_final_after_a_known_pre_release_is_not_that_pre_release() -> None:
    """0.32.0 runs other code than 0.32.0rc1: without its code it stands in, said as such; a final
    patch release still runs its minor's final release's code."""
    final = target.resolve_target("0.32.0")
    assert not final.exact and final.basis == "0.32.0rc1" and "standing in for 0.32.0" in final.source
    assert target.resolve_target("0.30.1").basis == "0.30.0"
    assert not target.resolve_target("0.31.0.dev5").exact  # a dev build is not 0.31.0rc1


def test_pre_releases_order_before_their_final() -> None:
    from omni_deploy.knowledge.versions import is_newer_than_known, order

    assert order("0.31.0.dev5") < order("0.31.0rc1") < order("0.31.0") < order("0.32.0rc1") < order("0.32.0")
    assert sorted(RELEASES, key=order) == list(RELEASES)
    assert is_newer_than_known("0.32.0") and not is_newer_than_known("0.32.0rc1")
    assert RELEASED == "0.30.0"  # the newest final release: the default target without an install

"""The dataset path sanitiser: spelling, links out of the folder, file types, sizes, modes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from omni_deploy.bench import dataset_paths
from omni_deploy.bench.dataset_paths import InputsError


def test_a_link_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "outside").write_text("private")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.wav").symlink_to(tmp_path / "outside")
    with pytest.raises(InputsError, match="leads outside"):
        dataset_paths.inside(tmp_path / "d", "a.wav", "here")


def test_a_link_inside_the_folder_is_kept(tmp_path: Path) -> None:
    (tmp_path / "b.wav").write_text("x")
    (tmp_path / "a.wav").symlink_to("b.wav")
    assert dataset_paths.inside(tmp_path, "a.wav", "here") == tmp_path / "a.wav"


@pytest.mark.parametrize("name", ["", "/etc/passwd", "../x", "a\\b", "a\x00b"])
def test_spelling_that_leaves_the_folder(name: str) -> None:
    with pytest.raises(InputsError, match="not a path inside"):
        dataset_paths.spelt_inside(name, "here")


def test_copy_keeps_a_private_mode(tmp_path: Path) -> None:
    source = tmp_path / "a.wav"
    source.write_bytes(b"RIFF")
    source.chmod(0o600)
    dataset_paths.copy(source, tmp_path / "b.wav", "a.wav")
    assert stat.S_IMODE(os.stat(tmp_path / "b.wav").st_mode) == 0o600


def test_size_and_type_bounds(tmp_path: Path) -> None:
    big = tmp_path / "big.wav"
    with open(big, "wb") as handle:
        handle.truncate(dataset_paths.MAX_FILE_BYTES + 1)
    with pytest.raises(InputsError, match="limit"):
        dataset_paths.sha256(big, "big.wav")
    os.mkfifo(tmp_path / "p.wav")
    assert dataset_paths.problem(tmp_path / "p.wav") == "a FIFO (named pipe)"
    assert dataset_paths.problem(tmp_path / ("x" * 300)) == "File name too long"


def test_the_hash_budget_is_shared(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"12345")
    budget = dataset_paths.HashBudget(8)
    dataset_paths.sha256(tmp_path / "a", "a", budget)
    with pytest.raises(InputsError, match="in all"):
        dataset_paths.sha256(tmp_path / "a", "a", budget)

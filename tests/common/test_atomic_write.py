"""The one atomic writer (common/atomic_write.write_atomic): `--fix`'s policy keeps the file's owner,
group and mode and follows a link; the policy for our own files replaces a link and sets the mode."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from omni_deploy.common.atomic_write import KEEP, write_atomic


def replace_file(path: Path, data: bytes) -> None:
    """`--fix`'s policy."""
    write_atomic(path, data, link="follow", mode=KEEP, fsync=True)


def test_mode_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text("a: 1\n")
    path.chmod(0o640)
    replace_file(path, b"a: 2\n")
    assert path.read_bytes() == b"a: 2\n" and stat.S_IMODE(path.stat().st_mode) == 0o640


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (to give the file another owner)")
def test_owner_and_group_are_kept_when_run_as_root(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text("a: 1\n")
    os.chown(path, 4242, 4343)
    path.chmod(0o600)
    replace_file(path, b"a: 2\n")
    info = path.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4242, 4343, 0o600)
    assert [p.name for p in tmp_path.iterdir()] == ["f.yaml"]  # no temporary left


def test_keep_follows_a_link_and_rewrites_its_target(tmp_path: Path) -> None:
    real = tmp_path / "real.yaml"
    real.write_text("a: 1\n")
    real.chmod(0o640)
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    replace_file(link, b"a: 2\n")
    assert link.is_symlink() and real.read_bytes() == b"a: 2\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.yaml", "real.yaml"]


def test_replace_replaces_a_link_and_leaves_its_target_alone(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("theirs")
    path = tmp_path / "ours.json"
    path.symlink_to(victim)
    write_atomic(path, b"{}", link="replace", mode=0o600, fsync=False)
    assert not path.is_symlink() and path.read_bytes() == b"{}" and victim.read_text() == "theirs"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_mode_is_exact_whatever_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "f"
    old = os.umask(0o077)
    try:
        write_atomic(path, b"x", link="replace", mode=0o644, fsync=False)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_refuse_writes_a_new_file_or_nothing(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    write_atomic(path, b"one", link="replace", mode=0o644, fsync=False, existing="refuse")
    with pytest.raises(FileExistsError):
        write_atomic(path, b"two", link="replace", mode=0o644, fsync=False, existing="refuse")
    dangling = tmp_path / "dangling.onnx"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileExistsError):
        write_atomic(dangling, b"two", link="replace", mode=0o644, fsync=False, existing="refuse")
    assert path.read_bytes() == b"one" and not (tmp_path / "nowhere").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.onnx", "model.onnx"]

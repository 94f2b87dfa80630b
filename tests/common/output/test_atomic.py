"""`--fix`'s writes keep the file's owner, group and mode (common/output/atomic.replace_file)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from omni_deploy.common.output.atomic import replace_file


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

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.leftovers import kill_all, leftovers, mark_session

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
# Set at import, before any test starts a process: every child inherits it.
SESSION = mark_session()


@pytest.fixture(scope="session", autouse=True)
def no_process_survives_the_run() -> Iterator[None]:
    """Fail the run when a test left a process behind (then kill it, so it costs nothing more)."""
    yield
    deadline = time.monotonic() + 5  # processes that are stopping get a moment to finish
    found = leftovers(SESSION)
    while found and time.monotonic() < deadline:
        time.sleep(0.2)
        found = leftovers(SESSION)
    if found:
        kill_all(found)
        listed = "\n".join(f"  pid {pid}: {command}" for pid, command in found)
        pytest.fail(f"{len(found)} process(es) outlived the test run (killed now):\n{listed}", pytrace=False)


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def standin_onnx() -> Path:
    """A stand-in campplus.onnx (real structure, random weights), exported once into the cache."""
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    from omni_deploy.speaker.standin import export_standin
    from tests.support.upstream import CACHE

    path = CACHE / "campplus-standin-seed0.onnx"
    if not path.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        export_standin(path, seed=0)
    return path


@pytest.fixture
def outside_project(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory is an empty folder in no project: commands given no FILE fall back
    to the bundled profile (in the checkout they would find its deploy/ files)."""
    empty = tmp_path_factory.mktemp("no-project")
    monkeypatch.chdir(empty)
    return empty

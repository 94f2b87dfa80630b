from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.leftovers import kill_all, leftovers, mark_session

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
# Where tests read every release's wheel through omni_deploy.knowledge.generate.wheel_tree, which
# unpacks without a lock of its own: with pytest-xdist the controller unpacks them first (below).
ALL_RELEASES_UNDER = (TESTS, TESTS / "knowledge", TESTS / "validate")
DATA = Path(__file__).resolve().parent / "data"
# Set at import, before any test starts a process: every child inherits it.
SESSION = mark_session()
# pytest-xdist's workers run with COLUMNS=80 and LINES=24 where the run itself had neither; output
# fitted to the terminal (tables, code frames) must be tested as the run sees it. The controller
# imports this file before it starts the workers, so they inherit what it recorded here.
for _name in ("COLUMNS", "LINES"):
    _seen = os.environ.get(f"OMNI_DEPLOY_TEST_RUN_{_name}")
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ[f"OMNI_DEPLOY_TEST_RUN_{_name}"] = os.environ.get(_name, "")
    elif _seen == "":
        os.environ.pop(_name, None)
    elif _seen is not None:
        os.environ[_name] = _seen


# Tests that run for minutes on a 2-core machine (Triton's CPU interpreter running the kernels and
# the whole CAM++ forward). Under pytest-xdist they are handed out first, so that they run beside
# the rest of the suite instead of after it on one worker while the others wait (measured: a
# 6-minute tail on 2 cores).
SLOW_FIRST = ("tests/speaker/test_triton_kernels.py",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the order of the files, as written
    slow = [item for item in items if item.nodeid.startswith(SLOW_FIRST)]
    if slow:
        chosen = set(map(id, slow))
        items[:] = slow + [item for item in items if id(item) not in chosen]


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under pytest-xdist, before the workers start: the vllm-omni wheels unpacked once, whole, so
    that no two workers download or unpack the same release at once (tests/support/cache_lock.py)."""
    config = session.config
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return  # a worker, or a run without xdist (one process: nothing races)
    if "not upstream" in (config.option.markexpr or ""):
        return
    asked = {Path(str(arg).split("::")[0]).resolve() for arg in config.args}
    if not asked & {p.resolve() for p in ALL_RELEASES_UNDER}:
        return  # a part of the suite: the locked wheel_root() is enough
    from omni_deploy.knowledge.versions import RELEASES
    from tests.support.upstream import CACHE, unpacked

    for version in RELEASES:
        target = CACHE / f"vllm_omni-{version}"
        if not (target / "vllm_omni" / "__init__.py").is_file():
            unpacked(version, target)


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
    """A stand-in campplus.onnx (real structure, random weights), exported once into the cache (once
    for all test processes: under a lock, renamed into place when whole)."""
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    from omni_deploy.speaker.standin import export_standin
    from tests.support.cache_lock import made_once
    from tests.support.upstream import CACHE

    return made_once(CACHE / "campplus-standin-seed0.onnx", lambda partial: export_standin(partial, seed=0))


@pytest.fixture
def outside_project(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory is an empty folder in no project: commands given no FILE fall back
    to the bundled profile (in the checkout they would find its deploy/ files)."""
    empty = tmp_path_factory.mktemp("no-project")
    monkeypatch.chdir(empty)
    return empty

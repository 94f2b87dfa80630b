"""The k8s tests run the CLI outside any project: `k8s` given no FILE takes the bundled profile
there (in the checkout, which has two deploy files, it would ask for one by name)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _outside_a_project(outside_project: object) -> None:
    """Every test here: the working directory is an empty folder (tests/conftest.py)."""

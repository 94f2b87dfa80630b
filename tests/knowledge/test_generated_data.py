"""The committed upstream_keys.json is what the generator reads from every released wheel today."""

from __future__ import annotations

import pytest

from omni_deploy.knowledge.generate import DATA_FILE, generate

pytestmark = pytest.mark.upstream


def test_data_file_has_not_drifted() -> None:
    assert DATA_FILE.read_text() == generate(), "run: python -m omni_deploy.knowledge.generate"

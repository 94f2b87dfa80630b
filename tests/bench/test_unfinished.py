"""A round file is finished only when it is a result; a mean of finite rounds is finite."""

from __future__ import annotations

import json
import math
from pathlib import Path

from omni_deploy.bench.report import _change, _stats
from omni_deploy.bench.results import unfinished


def test_empty_and_cut_short_round_files_are_not_finished(tmp_path: Path) -> None:
    empty, cut, good = tmp_path / "e.json", tmp_path / "c.json", tmp_path / "g.json"
    empty.write_bytes(b"")
    cut.write_text('{"completed": 8, "max_conc')
    good.write_text(json.dumps({"completed": 8, "max_concurrency": 1}))
    assert unfinished(empty) and unfinished(cut)
    assert unfinished(good) is None


def test_the_mean_of_huge_finite_rounds_is_finite() -> None:
    stats = _stats([1.5e308, 1.6e308])
    assert stats is not None and math.isfinite(stats["mean"]) and stats["mean"] == 1.55e308
    assert _change({"mean": 1e300}, {"mean": 1e-300}) is None  # an overflowing ratio is no figure

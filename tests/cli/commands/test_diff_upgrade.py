"""`omni-deploy diff --target-version OLD..NEW FILE`: one file as two vllm-omni releases see it,
with the bases each release bundles read from that release's own wheel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.json_shapes import assert_shape
from tests.support.upstream import CACHE, unpacked

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "diff"
pytestmark = pytest.mark.upstream  # the wheels of 0.30.0, 0.31.0rc1 and 0.32.0rc1


def _bundled(version: str, name: str) -> str:
    """A deploy file a release bundles, from its real wheel."""
    target = CACHE / f"vllm_omni-{version}"
    if not (target / "vllm_omni" / "deploy" / name).is_file():
        unpacked(version, target)
    return str(target / "vllm_omni" / "deploy" / name)


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """The releases' deploy folders come from the test cache (where the wheels are unpacked)."""
    monkeypatch.setenv("OMNI_DEPLOY_TEST_CACHE", str(CACHE))
    for version in ("0.30.0", "0.31.0rc1", "0.32.0rc1"):
        _bundled(version, "minicpmo_4_5.yaml")


def test_capacities_inherited_from_the_bundled_base_change(capsys: pytest.CaptureFixture[str]) -> None:
    """0.32.0rc1's minicpmo_4_5.yaml raises max_num_seqs 4 -> 16 and the Talker's KV 2 -> 4 GiB."""
    turn = _bundled("0.30.0", "minicpmo_4_5_turn.yaml")
    result = run_cli(capsys, "diff", "--target-version", "0.30.0..0.32.0rc1", turn, "-o", "json")
    assert result.code == 1, result.err
    data = json.loads(result.out)
    assert_shape(data, "diff")
    changes = {c["path"]: c for c in data["changes"]}
    seqs = changes["$.stages[?@.stage_id==0].max_num_seqs"]
    assert (seqs["a"]["value"], seqs["b"]["value"]) == (4, 16)
    assert "vllm_omni-0.30.0/vllm_omni/deploy/minicpmo_4_5.yaml" in seqs["a"]["origin"]["file"]
    assert "vllm_omni-0.32.0rc1/vllm_omni/deploy/minicpmo_4_5.yaml" in seqs["b"]["origin"]["file"]
    kv = changes["$.stages[?@.stage_id==1].kv_cache_memory_bytes"]
    assert (kv["a"]["value"], kv["b"]["value"]) == (2 * 1024**3, 4 * 1024**3)
    assert data["a"]["chain"][1].endswith("vllm_omni-0.30.0/vllm_omni/deploy/minicpmo_4_5.yaml")
    assert data["b"]["chain"][1].endswith("vllm_omni-0.32.0rc1/vllm_omni/deploy/minicpmo_4_5.yaml")
    upgrade = data["upgrade"]
    assert (upgrade["from"], upgrade["to"]) == ("0.30.0", "0.32.0rc1")
    # Newly read with a default the server now meets: the top-level cuda_mps (off).
    defaults = {(d["place"], d["key"]): d for d in upgrade["defaults"]}
    assert defaults[("top", "cuda_mps")]["old"] is None
    assert defaults[("top", "cuda_mps")]["new"]["default"] is False
    behaviour = {(b["platform"], b["topic"]): b for b in upgrade["behaviour"]}
    tf32 = behaviour[("cuda", "tf32")]
    assert (tf32["old"]["value"], tf32["new"]["value"]) == (False, True)
    assert tf32["new"]["at"].startswith(
        "vllm_omni/model_executor/models/minicpmo_4_5/minicpmo_4_5_code2wav.py:"
    )
    assert behaviour[("cuda", "reference_prefetch")]["new"]["value"] is True


def test_text_names_both_releases_and_the_tf32_default(capsys: pytest.CaptureFixture[str]) -> None:
    turn = _bundled("0.31.0rc1", "minicpmo_4_5_turn.yaml")
    result = run_cli(capsys, "diff", "--target-version", "0.31.0rc1..0.32.0rc1", turn)
    assert result.code == 1, result.err
    out = result.out
    assert out.startswith("--- vllm-omni 0.31.0rc1: ") and "+++ vllm-omni 0.32.0rc1: " in out
    assert "~ $.connectors.connector_of_shared_memory.extra.max_graph_batch" in out  # 16 -> 32
    assert "  cuda tf32:" in out and "default off" in out and "default on" in out
    assert "code2wav.token2wav_ref_prefetch: not read by 0.31.0rc1 -> True" in out


def test_async_chunk_default_changes_for_a_file_that_leaves_it_unset(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = run_cli(capsys, "diff", "--target-version", "0.30.0..0.32.0rc1", str(DATA / "no_async_chunk.yaml"),
                     "-o", "json")  # fmt: skip
    assert result.code == 1, result.err
    defaults = {(d["place"], d["key"]): d for d in json.loads(result.out)["upgrade"]["defaults"]}
    chunk = defaults[("top", "async_chunk")]
    assert chunk["old"]["default"] is True and chunk["new"]["default"] is None


def test_values_newly_refused_and_keys_no_longer_read(capsys: pytest.CaptureFixture[str]) -> None:
    """The seed's profile as 0.30.0 and 0.32.0rc1 read it: 0.30.0 ignores micro_batch_size (W310)."""
    bench = str(ROOT / "deploy" / "vllm-omni-0.32.0rc1" / "turn-bench.yaml")
    result = run_cli(capsys, "diff", "--target-version", "0.30.0..0.32.0rc1", bench, "-o", "json")
    data = json.loads(result.out)
    gone = {(f["code"], f["path"].rsplit(".", 1)[-1]) for f in data["upgrade"]["findings_gone"]}
    assert ("W310", "micro_batch_size") in gone and ("W310", "cfm_graph_precapture") in gone


def test_same_release_is_identical_and_bad_ranges_are_usage_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    turn = _bundled("0.32.0rc1", "minicpmo_4_5_turn.yaml")
    same = run_cli(capsys, "diff", "--target-version", "0.32.0rc1..0.32.0rc1", turn)
    assert same.code == 0 and same.out.splitlines()[-1] == "identical"
    for bad in ("0.30.0", "0.30.0..", "0.30.0..banana", "0.29.0..0.32.0rc1"):
        refused = run_cli(capsys, "diff", "--target-version", bad, turn)
        assert refused.code == 2 and "Traceback" not in refused.err, bad
    both = run_cli(capsys, "diff", "--target-version", "0.30.0..0.32.0rc1", turn, turn)
    assert both.code == 2 and "give A only" in both.err
    assert run_cli(capsys, "diff", turn).code == 2


def test_a_base_the_old_release_does_not_ship_is_trouble_not_a_crash(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """0.30.0 ships no minicpmo_4_5_turn_mrv2.yaml: exit 2 with the path tried."""
    mrv2 = _bundled("0.32.0rc1", "minicpmo_4_5_turn_mrv2_h200.yaml")
    result = run_cli(capsys, "diff", "--target-version", "0.30.0..0.32.0rc1", mrv2)
    assert result.code == 2 and "minicpmo_4_5_turn_mrv2" in result.err and "Traceback" not in result.err

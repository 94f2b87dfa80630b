"""omni-deploy's benchmark profiles: each says which vllm-omni release it is for, the 0.32.0rc1 one
is the seed's file as the seed wrote it, and its bases are 0.32.0rc1's own bundled files."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_deploy.config.nodes import to_plain
from omni_deploy.deployment.model import Deployment
from omni_deploy.knowledge.versions import RELEASES
from tests.support.profiles import DEPLOY, profiles, release_of
from tests.support.upstream import CACHE, unpacked

SEED = Path(__file__).resolve().parents[1] / "data" / "deploy" / "seed_turn_bench.yaml"
COPIES = DEPLOY / "vllm-omni-0.32.0rc1"
BENCH_032 = COPIES / "turn-bench.yaml"


def test_every_profile_names_a_release_omni_deploy_knows() -> None:
    said = {p.relative_to(DEPLOY).as_posix(): release_of(p) for p in profiles()}
    assert said == {"minicpmo_4_5_turn.yaml": "0.30.0", "turn-bench.yaml": "0.30.0",
                    "vllm-omni-0.32.0rc1/turn-bench.yaml": "0.32.0rc1"}  # fmt: skip
    assert set(said.values()) <= set(RELEASES)


def test_the_032_profile_is_the_seeds_overlay_of_minicpmo_4_5_turn_mrv2() -> None:
    """The seed's turn-bench.yaml: base minicpmo_4_5_turn_mrv2.yaml, CFM micro-batch 4, graph budget 32,
    precapture, HiFT graphs 1/2/4/8, capacities 16/8/8, KV 4 and 2 GiB, cuda_mps off."""
    deployment = Deployment.load(str(BENCH_032))
    assert [p.name for p in deployment.chain] == [
        "turn-bench.yaml", "minicpmo_4_5_turn_mrv2.yaml", "minicpmo_4_5_turn.yaml", "minicpmo_4_5.yaml",
    ]  # fmt: skip
    assert all(p.parent == COPIES for p in deployment.chain)
    extra = to_plain(deployment.code2wav_extra())
    assert {k: extra[k] for k in ("micro_batch_size", "cfm_graph_precapture", "cfm_max_graphs",
                                  "hift_graph_capture_batch_sizes")} == {
        "micro_batch_size": 4, "cfm_graph_precapture": True, "cfm_max_graphs": 32,
        "hift_graph_capture_batch_sizes": [1, 2, 4, 8],
    }  # fmt: skip
    cuda = deployment.on("cuda").config
    stages = {s["stage_id"]: s for s in to_plain(cuda)["stages"]}
    assert [stages[i]["max_num_seqs"] for i in (0, 1, 2)] == [16, 8, 8]
    assert (
        stages[0]["kv_cache_memory_bytes"] == 4 * 1024**3
        and stages[1]["kv_cache_memory_bytes"] == 2 * 1024**3
    )
    assert all(stages[i].get("model_runner") == "v2" for i in (0, 1, 2))  # the mrv2 base's
    platforms = to_plain(deployment.config)["platforms"]
    assert platforms["cuda"]["cuda_mps"] is False


def test_the_032_profile_sets_what_the_seeds_file_sets() -> None:
    """Every line of the seed's file (but base_config, which names the seed's checkout) is here."""
    seeds = [line.split("#", 1)[0].rstrip() for line in SEED.read_text(encoding="utf-8").splitlines()]
    ours = [line.split("#", 1)[0].rstrip() for line in BENCH_032.read_text(encoding="utf-8").splitlines()]
    assert [x for x in ours if x.strip() and not x.startswith("base_config:")] == [
        x for x in seeds if x.strip() and not x.startswith("base_config:")
    ]
    assert "minicpmo_4_5_turn_mrv2.yaml" in next(x for x in seeds if x.startswith("base_config:"))


@pytest.mark.upstream
@pytest.mark.parametrize("name", sorted(p.name for p in COPIES.glob("*.yaml") if p != BENCH_032))
def test_the_bases_are_0_32s_own_files(name: str) -> None:
    target = CACHE / "vllm_omni-0.32.0rc1"
    if not (target / "vllm_omni" / "deploy" / name).is_file():
        unpacked("0.32.0rc1", target)
    assert (COPIES / name).read_bytes() == (target / "vllm_omni" / "deploy" / name).read_bytes()

"""All of vllm-omni 0.30.0's bundled deploy files, validated against 0.30.0."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_deploy.validate.context import Options
from omni_deploy.validate.runner import validate_file
from tests.support import upstream

pytestmark = pytest.mark.upstream
ROOT = Path(__file__).resolve().parents[2]

# Every warning and error the bundled files produce, each with why it is real.
KNOWN = {
    (
        "indextts2_low_latency.yaml",
        "W351",
    ): "stages 0 and 1 share GPU 0 at 0.6 + 0.4 = 1.0: no headroom at all",
    ("moss_sound_effect.yaml", "W351"): "0.85 + 0.12 = 0.97 of GPU 0",
    ("moss_tts.yaml", "W351"): "0.85 + 0.12 = 0.97 of GPU 0, on cuda and rocm",
    ("moss_ttsd.yaml", "W351"): "0.85 + 0.12 = 0.97 of GPU 0",
    ("voxtral_tts.yaml", "W351"): "its xpu section puts 0.7 + 0.28 = 0.98 on one device",
    ("nemotron_labs_voicechat_duplex.yaml", "W340"): "its stage 1 hf_overrides replaces the base's mapping "
    "whole (hf_overrides is not one of the five deep-merged keys), dropping base keys",
    # A real over-subscription in an experimental profile that says it is not for production:
    # stage 1's four replicas take 0.8 of GPUs 4-7 while stage 2 still asks 0.9 of GPU 5.
    ("minicpmo_4_5_8x4090_stage1_replicas.yaml", "E350"): "0.8 + 0.9 = 1.7 of GPU 5",
}


def test_bundled_files() -> None:
    files = upstream.deploy_files()
    assert len(files) == 110
    seen: set[tuple[str, str]] = set()
    for path in files:
        report = validate_file(str(path), Options(target_version="0.30.0"))
        for finding in report.findings:
            if finding.severity == "info":
                continue
            key = (path.name, finding.code)
            assert key in KNOWN, finding.text()
            seen.add(key)
        if (path.name, "E350") not in KNOWN:
            assert report.valid, path.name
    assert seen == set(KNOWN)


def test_turn_bench_warns_about_each_seed_key_0_30_0_ignores() -> None:
    bench = ROOT / "deploy" / "turn-bench.yaml"
    report = validate_file(str(bench), Options(target_version="0.30.0"))
    assert report.valid
    warned = {f.path.rsplit(".", 1)[-1] for f in report.findings if f.code == "W310"}
    assert warned == {"micro_batch_size", "cfm_graph_precapture"}
    assert all(f.file.endswith("turn-bench.yaml") for f in report.findings if f.code == "W310")
    newer = validate_file(str(bench), Options(target_version="main"))
    assert [f for f in newer.findings if f.severity != "info"] == []


def test_bundled_default_is_clean() -> None:
    report = validate_file(str(ROOT / "deploy" / "minicpmo_4_5_turn.yaml"), Options(target_version="0.30.0"))
    assert [f.text() for f in report.findings if f.severity != "info"] == []

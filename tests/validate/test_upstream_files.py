"""Every released vllm-omni wheel's own bundled deploy files, validated at that release's target:
only the findings shown real by reading upstream code remain, each listed here with why."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_deploy.knowledge.generate import wheel_tree
from omni_deploy.knowledge.versions import RELEASES
from omni_deploy.validate.context import Options
from omni_deploy.validate.runner import validate_file
from tests.support.profiles import by_release

pytestmark = pytest.mark.upstream
ROOT = Path(__file__).resolve().parents[2]

CONNECTOR_POLLING = (
    "vllm-omni's MiniCPM-o profiles carry connector_get_sleep_s, connector_get_max_wait_first_chunk "
    "and connector_get_max_wait; no release's code reads them (only a comment mentions them: 0.30.0 "
    "model_executor/stage_input_processors/qwen3_tts.py:44)"
)

# (version or "*", file, code) -> why it is real, with the upstream line that makes it so. Errors first.
MEMORY = (
    "vllm/v1/worker/utils.py:539-545 (vLLM 0.30.0): a stage asking more than the free memory is a ValueError"
)
KNOWN: dict[tuple[str, str, str], str] = {
    # Stage 1's four replicas take 0.8 of GPUs 4-7 while stage 2 still asks 0.9 of GPU 5 (the overlay
    # sets stage 1's share; the 0.9 comes from minicpmo_4_5_8x4090.yaml). An experimental profile
    # that says it is not for production; every release that ships it.
    ("*", "minicpmo_4_5_8x4090_stage1_replicas.yaml", "E350"): f"0.8 + 0.9 = 1.7 of GPU 5; {MEMORY}",
    # Its xpu section puts stage 0 (0.95) and stage 1 (0.9) on the same eight cards.
    ("0.22.0", "hunyuan_image_3_moe.yaml", "E350"): f"xpu: 0.95 + 0.9 per card; {MEMORY}",
    ("0.24.0", "hunyuan_image_3_moe.yaml", "E350"): f"xpu: 0.95 + 0.9 per card; {MEMORY}",
    ("0.26.0", "hunyuan_image_3_moe.yaml", "E350"): f"xpu: 0.95 + 0.9 per card; {MEMORY}",
    ("0.28.0", "hunyuan_image_3_moe.yaml", "E350"): f"xpu: 0.95 + 0.9 per card; {MEMORY}",
    # Its npu section sets sequence_parallel_size and scheduler_cls on stage 0, an llm_ar stage of
    # glm_image, which 0.30.0's typed config has no owner for: config/omni_config.py:1324 refuses it
    # on NPU (the server check, run on this file with --platform npu, raises exactly that).
    ("0.30.0", "glm_image.yaml", "E315"): "npu: stage 0 sequence_parallel_size, scheduler_cls; omni_config.py:1324",
    # The same npu section, still unowned in 0.31.0rc1 (omni_config.py:1291) and 0.32.0rc1
    # (omni_config.py:1355): vllm-omni 0.32.0rc1's own start-up, run by the server check on this file
    # with --platform npu, refuses it too (issue 39). Its stage model_runner, a wrapper key from 0.31
    # on (stage_config.py `_STAGE_RESERVED_KEYS`), is not among them: the files that set it pass.
    ("0.31.0rc1", "glm_image.yaml", "E315"): "npu: stage 0 sequence_parallel_size, scheduler_cls; omni_config.py:1291",
    ("0.32.0rc1", "glm_image.yaml", "E315"): "npu: stage 0 sequence_parallel_size, scheduler_cls; omni_config.py:1355",
    # An H200 profile whose base (minicpmo_4_5.yaml) has an npu section, so it is checked for npu too;
    # there 0.32.0rc1's NPU Code2Wav raises on code2wav_bfloat16_attention_cache: true when it builds
    # (platforms/npu/models/minicpmo_4_5_code2wav.py:342-346). On cuda the file is clean.
    ("0.32.0rc1", "minicpmo_4_5_duplex_h200.yaml", "E373"): "npu only; minicpmo_4_5_code2wav.py:342",
    # Warnings: tight memory shares (what is left for activations and the CUDA context).
    ("*", "indextts2_low_latency.yaml", "W351"): f"stages 0 and 1 share GPU 0 at 0.6 + 0.4 = 1.0; {MEMORY}",
    ("*", "moss_sound_effect.yaml", "W351"): f"0.85 + 0.12 = 0.97 of GPU 0; {MEMORY}",
    ("*", "moss_tts.yaml", "W351"): f"0.85 + 0.12 = 0.97 of GPU 0; {MEMORY}",
    ("*", "moss_ttsd.yaml", "W351"): f"0.85 + 0.12 = 0.97 of GPU 0; {MEMORY}",
    ("*", "voxtral_tts.yaml", "W351"): f"its xpu section puts 0.7 + 0.28 = 0.98 on one device; {MEMORY}",
    ("0.30.0", "nemotron_labs_voicechat_duplex.yaml", "W340"): "stage 1 hf_overrides replaces the base's "
    "mapping whole: config/stage_config.py:681-703 (0.30.0) deep-merges only the five keys of _DEEP_MERGE_KEYS",
    ("0.31.0rc1", "nemotron_labs_voicechat_duplex.yaml", "W340"): "the same; _DEEP_MERGE_KEYS unchanged in 0.31",
    ("0.32.0rc1", "nemotron_labs_voicechat_duplex.yaml", "W340"): "the same; _DEEP_MERGE_KEYS unchanged in 0.32",
    # Its npu stage 2 additional_config replaces the base's, dropping cfm_graph_batch_buckets: the file's
    # own comment says "stage fields merge by replacement" (0.32.0rc1 stage_config.py _merge_stage_lists).
    ("0.32.0rc1", "minicpmo_4_5_stage2_replicas.yaml", "W340"): "npu stage 2 additional_config replaced whole",
    # W310s left: only the connector polling keys (CONNECTOR_POLLING), read by no release. The ones
    # this table used to list were false: 0.26.0 reads codec_chunk_frames/codec_left_context_frames in
    # model_executor/stage_input_processors/minicpmo_4_5_omni.py:133-134, and 0.22.0 hands a diffusion
    # stage's engine_extras to OmniDiffusionConfig.from_kwargs (stage_config.py:578, 869), which takes them.
}  # fmt: skip


def _polling_only(message: str) -> bool:
    return "'connector_get_" in message and "read by no vllm-omni release" in message


def _files(version: str) -> list[Path]:
    return sorted((wheel_tree(version) / "vllm_omni" / "deploy").glob("*.yaml"))


@pytest.mark.parametrize("version", RELEASES)
def test_bundled_files_at_their_own_release(version: str) -> None:
    files = _files(version)
    assert files, f"vllm-omni {version} ships no deploy files"
    seen: set[tuple[str, str, str]] = set()
    unexpected = []
    for path in files:
        report = validate_file(str(path), Options(target_version=version))
        for finding in report.findings:
            if finding.severity == "info" or (finding.code == "W310" and _polling_only(finding.message)):
                continue
            for key in ((version, path.name, finding.code), ("*", path.name, finding.code)):
                if key in KNOWN:
                    seen.add(key)
                    break
            else:
                unexpected.append(finding.text())
            # A finding about a file's values points into that file or a base it names, never elsewhere.
            assert Path(finding.file).resolve().parent == path.resolve().parent or not finding.line, (
                finding.text()
            )
    assert not unexpected, "\n".join(unexpected)
    expected_here = {k for k in KNOWN if k[0] == version and k[1] in {p.name for p in files}}
    assert expected_here <= seen, sorted(expected_here - seen)


def test_polling_keys_are_the_only_other_warnings_and_name_no_release() -> None:
    report = validate_file(
        str(_files("0.30.0")[0].parent / "minicpmo_4_5.yaml"), Options(target_version="0.30.0")
    )
    polling = [f for f in report.findings if f.code == "W310"]
    assert {f.path.rsplit(".", 1)[-1] for f in polling} == {
        "connector_get_sleep_s", "connector_get_max_wait_first_chunk", "connector_get_max_wait",
    }  # fmt: skip
    assert all(_polling_only(f.message) for f in polling)


def test_overlay_sum_points_at_the_overlay() -> None:
    path = _files("0.30.0")[0].parent / "minicpmo_4_5_8x4090_stage1_replicas.yaml"
    report = validate_file(str(path), Options(target_version="0.30.0"))
    (finding,) = [f for f in report.findings if f.code == "E350"]
    assert Path(finding.file).resolve() == path.resolve() and finding.line
    assert "stage 2 0.9 at minicpmo_4_5_8x4090.yaml:" in finding.message


@pytest.mark.parametrize(("path", "release"), by_release())
def test_project_deploy_files_pass_strict(path: Path, release: str) -> None:
    report = validate_file(str(path), Options(target_version=release, strict=True))
    assert report.valid, [f.text() for f in report.findings]

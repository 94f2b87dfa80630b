"""The batched-preparation hook in a real MiniCPM-o 4.5 Code2Wav (vllm-omni 0.30.0), in process.

The real `MiniCPMO45Code2Wav.load_weights -> _build_backend` builds its backend on stand-in token2wav
assets (code2wav_standin.py); the hook (omni_deploy.integrations.refprep) is attached to it with
omni-deploy's CAM++ encoder on the CPU. One forward carries several requests, each with a new
reference voice at another rate: the hooked forward prepares them in one pass and must give the
same tokens, mels and (to rounding) embeddings as an unhooked Code2Wav's own per-voice preparation.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("vllm_omni")
pytest.importorskip("s3tokenizer")

import s3tokenizer
import torch
from vllm_omni.model_executor.models.minicpmo_4_5 import batched_token2wav as batched
from vllm_omni.model_executor.models.minicpmo_4_5 import minicpmo_4_5_code2wav as c2w
from vllm_omni.model_executor.models.step_audio2 import step_audio2_token2wav as step

from omni_deploy.integrations import refprep
from omni_deploy.speaker.encoder import get_encoder
from omni_deploy.speaker.inputs import synthetic_one
from tests.integration import code2wav_standin

pytestmark = pytest.mark.vllm

RATES = (16000, 22050, 48000)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, standin_onnx: Path) -> Path:
    return code2wav_standin.build_model_dir(tmp_path_factory.mktemp("hook") / "model", standin_onnx)


# vllm-omni 0.32 prepares its default prompt at the first forward to capture its graphs
# (`cfm_graph_precapture`, on by default; 0.30.0 reads no such key): off, so that each forward's
# passes here are its requests' voices.
STAGE_EXTRA = {"ref_audio_max_seconds": 2.0, "cfm_graph_precapture": False}


def build(model_dir: Path) -> Any:
    model_config = SimpleNamespace(
        model=str(model_dir), revision=None, stage_id=2,
        stage_connector_config={"name": "SharedMemoryConnector", "extra": STAGE_EXTRA},
    )  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(s3tokenizer, "load_model", code2wav_standin._small_s3_tokenizer)
        code2wav = c2w.MiniCPMO45Code2Wav(vllm_config=SimpleNamespace(model_config=model_config))
        code2wav.load_weights(iter(()))
    return code2wav


def hooked(model_dir: Path, lines: list[str], limit: int = 3) -> tuple[Any, refprep.HookState]:
    code2wav = build(model_dir)
    core = code2wav.backend._token2wav._core
    encoder = get_encoder(str(Path(core.model_path) / "campplus.onnx"), device="cpu")

    def log(level: str, message: str, *args: Any) -> None:
        lines.append(f"{level} {message % args}")

    state = refprep.make_state(code2wav, core, encoder, (step, batched), "stage 2", limit, log)
    refprep.attach(code2wav, state)
    return code2wav, state


def call(code2wav: Any, epoch: int = 0) -> list[torch.Tensor]:
    """One forward: one request per rate, each with a reference voice of its own (new voices for
    each `epoch`, the same voices again for the same one)."""
    infos, tokens = [], []
    for i, rate in enumerate(RATES):
        codes = torch.randint(0, 6561, (24,), generator=torch.Generator().manual_seed(10 + i))
        ref = torch.from_numpy(
            synthetic_one(1.0 + 0.3 * i, seed=40 + i + 100 * epoch, sample_rate=rate).waveform
        )
        meta = {"request_id": f"req-{epoch}-{i}", "cache_epoch": 0, "chunk_seq": 0, "last_chunk": True,
                "ref_audio_sr": rate, "code_flat_numel": int(codes.numel())}  # fmt: skip
        infos.append({"meta": meta, "codes": {"audio": codes, "ref": ref}})
        tokens.append(codes)
    output = code2wav.forward(
        input_ids=torch.cat(tokens),
        runtime_additional_information=infos,
        request_ids=[info["meta"]["request_id"] for info in infos],
        seq_token_counts=[int(t.numel()) for t in tokens],
    )
    return list(output.multimodal_outputs["model_outputs"])


def features(code2wav: Any) -> dict[Any, Any]:
    """vllm-omni's prompt-features cache by prompt_cache_id (each instance writes its request
    references into a temporary folder of its own, so the paths differ)."""
    return {key[0]: value for key, value in code2wav.backend._prompt_features.items()}


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    return float(a @ b / (a.norm() * b.norm()))


def test_one_pass_gives_vllm_omnis_features(model_dir: Path) -> None:
    plain = build(model_dir)
    expected_audio = call(plain)
    expected = features(plain)
    lines: list[str] = []
    code2wav, state = hooked(model_dir, lines)
    audio = call(code2wav)
    got = features(code2wav)
    assert state.passes == 1 and state.voices == len(RATES) and state.failures == 0
    assert set(got) == set(expected) and len(got) == len(RATES)
    for key, want in expected.items():
        mine = got[key]
        assert torch.equal(mine.speech_tokens, want.speech_tokens), key
        torch.testing.assert_close(mine.mels, want.mels, rtol=1e-5, atol=2e-5)
        assert cosine(mine.speaker_embedding, want.speaker_embedding) >= 0.99999  # ours vs ONNX Runtime
    for mine, theirs in zip(audio, expected_audio, strict=True):
        assert mine.shape == theirs.shape and bool(torch.isfinite(mine).all())
    assert any(line.startswith("info") and "3 voices in 1 passes" in line for line in lines)
    call(code2wav, epoch=1)  # new voices: a pass of their own
    assert state.passes == 2 and state.voices == 2 * len(RATES)
    call(code2wav, epoch=1)  # the same voices again, in vllm-omni's cache: no pass
    assert state.passes == 2


def test_a_failing_pass_leaves_the_call_to_vllm_omni(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines: list[str] = []
    code2wav, state = hooked(model_dir, lines, limit=2)

    def broken(voices: list[Any]) -> Any:
        raise RuntimeError("CUDA error: out of memory (stand-in fault)")

    monkeypatch.setattr(state.preparer, "prepare", broken)
    audio = call(code2wav)
    assert len(audio) == len(RATES) and all(a.numel() > 0 for a in audio)
    assert len(features(code2wav)) == len(RATES)  # vllm-omni prepared them, one by one
    assert state.failures == 1 and not state.retired
    assert any(line.startswith("warning") and "one by one" in line for line in lines)
    call(code2wav, epoch=1)
    assert state.retired  # two in a row
    call(code2wav, epoch=2)
    assert state.failures == 2  # retired: not tried again


def test_the_hook_leaves_other_instances_alone(model_dir: Path) -> None:
    code2wav, _ = hooked(model_dir, [])
    other = build(model_dir)
    assert "prepare_prompt" not in vars(other.backend) and "_parse_item" not in vars(other)
    assert "prepare_prompt" in vars(code2wav.backend) and "_parse_item" in vars(code2wav)


def test_the_real_classes_have_the_layout_the_hook_needs(model_dir: Path) -> None:
    assert refprep.layout_problem(build(model_dir), c2w, batched) is None
    assert "PromptFeatures" in (refprep.layout_problem(build(model_dir), c2w, SimpleNamespace()) or "")


def test_will_prepare_matches_vllm_omnis_loops() -> None:
    def item(tokens: int, last: bool, tts_last: bool, previous: object = None) -> Any:
        return SimpleNamespace(tokens=torch.zeros(tokens), last_chunk=last, tts_is_last_chunk=tts_last,
                               previous=previous)  # fmt: skip

    assert refprep.will_prepare(item(5, False, False))  # a chunk with tokens
    assert refprep.will_prepare(item(0, False, True))  # an initial segment marker
    assert not refprep.will_prepare(item(0, True, False))  # a terminal sentinel
    assert not refprep.will_prepare(item(0, False, True, previous=object()))  # a marker with state


def test_the_deploy_files_key_decides_the_stage(model_dir: Path) -> None:
    from omni_deploy.integrations.speaker_rules import KEY_DEVICE_PREPARE, choose

    def stage(extra: dict[str, Any]) -> tuple[Any, str, list[str]]:
        code2wav = build(model_dir)
        core = code2wav.backend._token2wav._core
        encoder = get_encoder(str(Path(core.model_path) / "campplus.onnx"), device="cpu")
        lines: list[str] = []

        def log(level: str, message: str, *args: Any) -> None:
            lines.append(f"{level} {message % args}")

        speaker = choose(extra, {}, on_cuda=True)
        field = refprep.hook_stage(code2wav, core, encoder, extra, speaker, "stage 2", 3, log)
        return code2wav, field, lines

    code2wav, field, lines = stage({})
    assert field == "batched" and "prepare_prompt" in vars(code2wav.backend) and lines == []
    assert isinstance(code2wav._omni_deploy_refprep, refprep.HookState)
    code2wav, field, _ = stage({KEY_DEVICE_PREPARE: False})
    assert field == "per-voice(token2wav_device_prepare)" and "prepare_prompt" not in vars(code2wav.backend)
    code2wav, field, lines = stage({KEY_DEVICE_PREPARE: True, "token2wav_device_spk": False})
    assert field == "per-voice(speaker backend cpu-onnxruntime)" and "_parse_item" not in vars(code2wav)
    assert len(lines) == 1 and lines[0].startswith("warning") and "cannot apply" in lines[0]


@pytest.mark.parametrize("allow_tf32", [True, False])
def test_the_stages_precision_policy_reaches_the_preparation(model_dir: Path, allow_tf32: bool) -> None:
    """token2wav_allow_tf32 of the deploy file is the policy the batched pass runs under (issue 30):
    an operator's `false` must not be left at the preparer's default."""
    from omni_deploy.integrations.speaker_rules import KEY_ALLOW_TF32, choose

    code2wav = build(model_dir)
    core = code2wav.backend._token2wav._core
    encoder = get_encoder(str(Path(core.model_path) / "campplus.onnx"), device="cpu")
    extra = {KEY_ALLOW_TF32: allow_tf32}
    speaker = choose(extra, {}, on_cuda=True)
    field = refprep.hook_stage(code2wav, core, encoder, extra, speaker, "stage 2", 3, lambda *a: None)
    assert field == "batched"
    assert code2wav._omni_deploy_refprep.preparer.allow_tf32 is allow_tf32


def test_the_plugins_patch_hooks_the_stage_behind_its_guard(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the plugin as vLLM loads it: register(), then vllm-omni's own load_weights ->
    _build_backend, wrapped by the MiniCPM-o patch (issue 22's lazy hook and guard)."""
    import logging

    from omni_deploy.integrations import import_hooks, report, takeover, vllm_plugin
    from omni_deploy.integrations.guard import GuardedSpeakerModel
    from omni_deploy.integrations.speaker_rules import LOGGER_NAME, REPORT_MARK

    monkeypatch.delenv("OMNI_DEPLOY_SPK_BACKEND", raising=False)
    monkeypatch.delenv("MINICPMO_TOKEN2WAV_TRT", raising=False)
    monkeypatch.setenv("OMNI_DEPLOY_SPK_ALLOW_CPU", "1")
    monkeypatch.setattr(report, "_warned", set())
    monkeypatch.setattr(import_hooks, "_hooks", {})
    monkeypatch.setattr(takeover, "_admitted", {})
    monkeypatch.delitem(c2w.__dict__, "__omni_deploy_patches__", raising=False)
    monkeypatch.setattr(c2w.MiniCPMO45Code2Wav, "_build_backend", c2w.MiniCPMO45Code2Wav._build_backend)
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger(LOGGER_NAME)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        vllm_plugin.register()
        code2wav = build(model_dir)
        core = code2wav.backend._token2wav._core
        assert isinstance(core._spk_model, GuardedSpeakerModel)
        state = code2wav._omni_deploy_refprep
        assert isinstance(state, refprep.HookState) and state.active()
        (line,) = [m for m in lines if m.startswith(REPORT_MARK)]
        assert "backend=cuda-torch" in line and " prepare=batched " in line + " "
        call(code2wav)
        assert state.passes == 1 and state.voices == len(RATES)
        core._spk_model.retired = True  # the guard retires the encoder: the pass stops with it
        call(code2wav, epoch=1)
        assert state.passes == 1 and len(features(code2wav)) == 2 * len(RATES)  # vllm-omni prepared them
    finally:
        logger.removeHandler(handler)

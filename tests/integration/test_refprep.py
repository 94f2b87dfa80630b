"""Batched reference preparation against vllm-omni 0.30.0's own per-voice `_prepare_prompt`.

The real `StepAudio2Token2WavCore` loads stand-in token2wav assets (code2wav_standin.py: real
structures, random weights; the S3 tokenizer is s3tokenizer's own S3TokenizerV2) and prepares each
voice from its WAV file as vllm-omni does: vLLM's `load_audio` and `AudioResampler`, s3tokenizer's
log-mel and `quantize`, torchaudio's Kaldi fbank into ONNX Runtime's CAM++, CosyVoice's mel. The
batched pass (omni_deploy.speaker.refprep) gets the same decoded voices, all at once, on the CPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("vllm_omni")
pytest.importorskip("s3tokenizer")

import s3tokenizer
import soundfile
import torch
from vllm_omni.model_executor.models.step_audio2 import step_audio2_token2wav as step

from omni_deploy.speaker.encoder import get_encoder
from omni_deploy.speaker.inputs import synthetic_one
from omni_deploy.speaker.refprep import plan, upstream_ops
from omni_deploy.speaker.refprep.prepare import DEFAULT_MARGIN, ReferencePreparer, Voice
from omni_deploy.speaker.refprep.s3_tokens import FSQ_SCALE
from tests.integration import code2wav_standin

pytestmark = pytest.mark.vllm

# (seconds, rate, channels): 1-6 s at every rate vllm-omni's callers send, mono and stereo.
VOICES = [
    (1.0, 16000, 1), (2.3, 22050, 2), (3.7, 24000, 1), (6.0, 44100, 2), (4.4, 48000, 1),
    (5.1, 16000, 2), (1.7, 48000, 2), (6.0, 24000, 1), (2.9, 44100, 1), (3.3, 22050, 1),
]  # fmt: skip


def write_voice(path: Path, seconds: float, rate: int, channels: int, seed: int) -> Path:
    left = synthetic_one(seconds, seed=seed, sample_rate=rate).waveform
    data = left if channels == 1 else np.stack([left, 0.7 * np.roll(left, 11)], axis=1)
    soundfile.write(path, data, rate, format="WAV")  # 16-bit PCM, as vllm-omni writes references
    return path


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory, standin_onnx: Path) -> Iterator[Any]:
    root = code2wav_standin.build_model_dir(tmp_path_factory.mktemp("refprep") / "model", standin_onnx)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(s3tokenizer, "load_model", code2wav_standin._small_s3_tokenizer)
        core = step.StepAudio2Token2WavCore(str(root / "assets" / "token2wav"), device="cpu")
        core._ensure_models_loaded()
    yield core


@pytest.fixture(scope="module")
def wavs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("voices")
    return [write_voice(folder / f"v{i}.wav", s, r, c, seed=100 + i) for i, (s, r, c) in enumerate(VOICES)]


def decoded(path: Path) -> Voice:
    samples, rate = step.load_audio(str(path), sr=None, mono=True)  # vLLM's decoder, as upstream
    return Voice(samples, int(rate))


def vllm_resample(audio: np.ndarray, orig: int, new: int) -> np.ndarray:
    return step.AudioResampler(target_sr=new).resample(audio, orig_sr=orig)


def exact_tokens(core: Any) -> Any:
    """vllm-omni's own S3 branch: vLLM's AudioResampler, s3tokenizer's mel, the core's tokenizer."""

    def run(voice: Voice, mel: torch.Tensor | None) -> torch.Tensor:
        return upstream_ops.s3_tokens(np.asarray(voice.samples), voice.sample_rate, core.audio_tokenizer,
                                      core.device, vllm_resample, mel=mel)[0]  # fmt: skip

    return run


def host_mels(voice: Voice) -> torch.Tensor:
    return upstream_ops.s3_mel(np.asarray(voice.samples), voice.sample_rate, vllm_resample)


def preparer(core: Any, standin_onnx: Path, **options: Any) -> ReferencePreparer:
    encoder = get_encoder(str(standin_onnx), device="cpu")
    options = {"exact_tokens": exact_tokens(core), "host_s3_mels": host_mels, **options}
    return ReferencePreparer(
        core.audio_tokenizer,
        lambda waves: encoder.embed_waveforms(waves, 16000),
        torch.device("cpu"),
        up_rate=core.flow.up_rate,
        **options,
    )


class QuantizerValues:
    """What the S3 quantizer rounds, caught in the per-voice path (tanh(projection) * 0.999)."""

    def __init__(self, tokenizer: Any) -> None:
        self.seen: list[torch.Tensor] = []
        self._hook = tokenizer.quantizer._codebook.project_down.register_forward_hook(self._catch)

    def _catch(self, module: Any, args: Any, out: torch.Tensor) -> None:
        self.seen.append((out.detach().float().tanh() * FSQ_SCALE).reshape(-1, 8))

    def close(self) -> None:
        self._hook.remove()


@pytest.fixture(scope="module")
def upstream(core: Any, wavs: list[Path]) -> list[tuple[Any, torch.Tensor]]:
    """vllm-omni's `_prepare_prompt` of each voice, and its quantizer values."""
    values = QuantizerValues(core.audio_tokenizer)
    try:
        prepared = [core._prepare_prompt(str(path)) for path in wavs]
    finally:
        values.close()
    assert len(values.seen) == len(wavs)
    return list(zip(prepared, values.seen, strict=True))


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    return float(a @ b / (a.norm() * b.norm()))


@pytest.mark.parametrize(
    ("route", "order"),
    [("device", "as-listed"), ("device", "reversed"), ("device", "two-passes"), ("host", "as-listed"),
     ("host", "two-passes")],
)  # fmt: skip
def test_batched_equals_vllm_omni_per_voice(
    core: Any, wavs: list[Path], upstream: list[tuple[Any, torch.Tensor]], standin_onnx: Path, route: str,
    order: str,
) -> None:  # fmt: skip
    """Every voice of a mixed batch: the same tokens (exactly), mels and embedding to rounding."""
    indices = list(range(len(wavs)))
    if order == "reversed":
        indices.reverse()
    batches = [indices[:4], indices[4:]] if order == "two-passes" else [indices]
    prep = preparer(core, standin_onnx, route=route)
    raw = preparer(core, standin_onnx, route=route, margin=-1.0)  # no recheck: the batched values alone
    for batch in batches:
        voices = [decoded(wavs[i]) for i in batch]
        got, stats = prep.prepare(voices)
        got_raw, raw_stats = raw.prepare(voices)
        assert stats.passes == 1 and stats.voices == len(batch) and stats.left_to_caller == 0
        assert stats.routes == {route: 1} and raw_stats.rechecked == 0
        for i, out, out_raw in zip(batch, got, got_raw, strict=True):
            (tokens, tokens_len, embedding, mels, mels_len), values = upstream[i]
            assert out is not None and out_raw is not None
            assert out.speech_tokens.dtype == tokens.dtype, VOICES[i]
            assert torch.equal(out.speech_tokens, tokens), VOICES[i]
            assert torch.equal(out.speech_token_len, tokens_len.to(torch.int32))
            assert torch.equal(out.mel_len, mels_len)
            assert out.mels.shape == mels.shape
            torch.testing.assert_close(out.mels, mels, rtol=1e-5, atol=2e-5)
            assert cosine(out.speaker_embedding, embedding) >= 0.99999  # ONNX Runtime's, from vllm-omni
            # The premise of the exact tokens: batched values within a quarter of the margin of
            # the one-by-one values, and the batched tokens alone right wherever the margin is wide.
            assert out_raw.quantizer_values is not None
            assert float((out_raw.quantizer_values - values).abs().max()) < DEFAULT_MARGIN / 4
            if out_raw.margin >= DEFAULT_MARGIN:
                assert torch.equal(out_raw.speech_tokens, tokens), VOICES[i]


def test_the_reproduction_is_vllm_omnis_prepare_prompt_bit_for_bit(
    core: Any, wavs: list[Path], upstream: list[tuple[Any, torch.Tensor]]
) -> None:
    """upstream_ops (what the GPU benchmark runs as the per-voice path) against the real thing."""
    for path, (expected, _) in zip(wavs, upstream, strict=True):
        voice = decoded(path)
        got = upstream_ops.prepare_one(
            np.asarray(voice.samples), voice.sample_rate, core.audio_tokenizer, core._forward_spk_embedding,
            core.device, up_rate=core.flow.up_rate,
        )  # fmt: skip
        for mine, theirs in zip(got, expected, strict=True):
            assert mine.dtype == theirs.dtype and torch.equal(mine, theirs), path.name


@pytest.mark.parametrize(
    ("options", "route"), [({"margin": 1.0}, "device"), ({"route": "per-voice"}, "per-voice")]
)
def test_tokens_from_vllm_omnis_own_path(core: Any, wavs: list[Path], standin_onnx: Path,
                                        upstream: list[tuple[Any, torch.Tensor]], options: dict[str, Any],
                                        route: str) -> None:  # fmt: skip
    """A margin every voice falls under, or the per-voice route (TF32 matmuls): every voice's
    tokens come from vllm-omni's own per-voice operations; the rest is still batched."""
    got, stats = preparer(core, standin_onnx, **options).prepare([decoded(p) for p in wavs[:3]])
    assert stats.rechecked == 3 and stats.passes == 1 and stats.routes == {route: 1}
    for out, ((tokens, _, embedding, mels, _), _) in zip(got, upstream[:3], strict=True):
        assert out is not None and out.rechecked and torch.equal(out.speech_tokens, tokens)
        torch.testing.assert_close(out.mels, mels, rtol=1e-5, atol=2e-5)
        assert cosine(out.speaker_embedding, embedding) >= 0.99999


def test_voices_it_cannot_batch_are_left_to_vllm_omni(
    core: Any, standin_onnx: Path, wavs: list[Path]
) -> None:
    short = Voice(np.zeros(300, dtype=np.float32), 16000)  # under one Kaldi frame: upstream raises
    long = Voice(np.zeros(31 * 16000, dtype=np.float32), 16000)  # over 30 s: s3tokenizer's own windows
    got, stats = preparer(core, standin_onnx).prepare([short, decoded(wavs[0]), long])
    assert got[0] is None and got[2] is None and got[1] is not None
    assert stats.left_to_caller == 2 and stats.voices == 1


def test_an_unusable_embedding_leaves_the_voice_to_vllm_omni(core: Any, wavs: list[Path]) -> None:
    def broken(waves: list[torch.Tensor]) -> torch.Tensor:
        out = torch.ones(len(waves), 192)
        out[0] = float("nan")
        out[1] = 0.0
        return out

    prep = ReferencePreparer(
        core.audio_tokenizer, broken, torch.device("cpu"), up_rate=core.flow.up_rate, margin=-1.0
    )
    got, stats = prep.prepare([decoded(p) for p in wavs[:3]])
    assert got[0] is None and got[1] is None and got[2] is not None
    assert stats.left_to_caller == 2


def test_lengths_follow_upstream_arithmetic() -> None:
    """The plan's integers against the operations they stand for, over many lengths and rates."""
    import torchaudio

    rng = np.random.default_rng(5)
    for _ in range(40):
        rate = int(rng.choice([8000, 16000, 22050, 24000, 32000, 44100, 48000]))
        n = int(rng.integers(800, 7 * rate))
        audio = torch.from_numpy(rng.standard_normal(n).astype(np.float32))
        a16 = audio if rate == 16000 else torchaudio.transforms.Resample(rate, 16000)(audio)
        a24 = audio if rate == 24000 else torchaudio.transforms.Resample(rate, 24000)(audio)
        voice = plan.VoicePlan.of(n, rate)
        assert (voice.samples16, voice.samples24) == (a16.numel(), a24.numel())
        assert voice.mel_frames == s3tokenizer.log_mel_spectrogram(a16).shape[1]
        assert voice.flow_frames == upstream_ops.cosyvoice_mel(a24[None]).shape[2]
        import torchaudio.compliance.kaldi as kaldi

        assert voice.fbank_frames == kaldi.fbank(a16[None], num_mel_bins=80, dither=0).shape[0]


def test_own_shapes_are_vllm_omnis_quantize_bit_for_bit(
    core: Any, wavs: list[Path], upstream: list[tuple[Any, torch.Tensor]], standin_onnx: Path
) -> None:
    """The own-shapes route (the TF32 policy's on CUDA; the batched rechecks'): every voice's
    quantizer values, not only its tokens, equal those of vllm-omni's per-voice quantize."""
    got, stats = preparer(core, standin_onnx, route="own-shapes").prepare([decoded(p) for p in wavs])
    assert stats.routes == {"own-shapes": 1} and stats.rechecked == 0
    for i, (out, ((tokens, *_), values)) in enumerate(zip(got, upstream, strict=True)):
        assert out is not None and out.quantizer_values is not None
        assert torch.equal(out.speech_tokens, tokens), VOICES[i]
        assert torch.equal(out.quantizer_values, values), VOICES[i]


@pytest.mark.parametrize("allow_tf32", [True, False], ids=["tf32-policy", "fp32-policy"])
def test_each_policy_gives_vllm_omnis_tokens_under_it(
    core: Any, wavs: list[Path], standin_onnx: Path, allow_tf32: bool
) -> None:
    """token2wav_allow_tf32 true and false, the route each chooses, against vllm-omni's own
    `_prepare_prompt` run under the same matmul policy. The CPU has no TF32: both policies are
    FP32 arithmetic here (their routes on CUDA: test_pieces); the flag must come back as it was."""
    from omni_deploy.speaker.precision import precision_scope

    with precision_scope(allow_tf32):
        expected = [core._prepare_prompt(str(p))[0] for p in wavs]
    before = torch.backends.cuda.matmul.allow_tf32
    got, stats = preparer(core, standin_onnx, allow_tf32=allow_tf32).prepare([decoded(p) for p in wavs])
    assert torch.backends.cuda.matmul.allow_tf32 == before
    assert stats.routes == {"device": 1}
    for i, (out, tokens) in enumerate(zip(got, expected, strict=True)):
        assert out is not None and torch.equal(out.speech_tokens, tokens), VOICES[i]


@pytest.fixture
def loader_context() -> Iterator[None]:
    """What vLLM builds and loads a stage under: set_default_torch_dtype(bfloat16) and a
    `with torch.device(...)` context (the CPU here, the stage's device there)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cpu"):
            yield
    finally:
        torch.set_default_dtype(previous)


@pytest.mark.parametrize("route", ["device", "host", "own-shapes"])
def test_the_loader_context_changes_nothing(
    core: Any, wavs: list[Path], standin_onnx: Path, route: str, loader_context: None
) -> None:
    """The batched pass under a bfloat16 default dtype and a device context: the same tokens, mels
    and embeddings, bit for bit, as under torch's defaults; the default dtype left as it was."""
    voices = [decoded(p) for p in wavs[:4]]
    got, _ = preparer(core, standin_onnx, route=route).prepare(voices)
    assert torch.get_default_dtype() == torch.bfloat16
    torch.set_default_dtype(torch.float32)
    try:
        expected, _ = preparer(core, standin_onnx, route=route).prepare(voices)
    finally:
        torch.set_default_dtype(torch.bfloat16)
    for out, ref in zip(got, expected, strict=True):
        assert out is not None and ref is not None
        assert out.speech_tokens.dtype == torch.int32 and out.mels.dtype == torch.float32
        assert out.speaker_embedding.dtype == torch.float32
        assert torch.equal(out.speech_tokens, ref.speech_tokens)
        assert torch.equal(out.mels, ref.mels)
        assert torch.equal(out.speaker_embedding, ref.speaker_embedding)


def test_warm_up_inside_the_loader_context(
    core: Any, wavs: list[Path], upstream: list[tuple[Any, torch.Tensor]], standin_onnx: Path,
    loader_context: None,
) -> None:  # fmt: skip
    """The take-over's warm-up where vLLM calls it: it runs passes of every size bucket up to the
    number asked for (no graphs on the CPU), keeps its counts out of the stats, and the pass after
    it still gives vllm-omni's tokens."""
    prep = preparer(core, standin_onnx)
    done = prep.warm_up(5)
    assert (
        done.route == "device" and done.graphs_captured == 0 and done.passes == 10
    )  # 1, 2, 4, 5; one voice of each other length; a recheck
    assert prep.stats.calls == 0 and torch.get_default_dtype() == torch.bfloat16
    got, _ = prep.prepare([decoded(p) for p in wavs[:2]])
    for out, ((tokens, *_), _) in zip(got, upstream[:2], strict=True):
        assert out is not None and torch.equal(out.speech_tokens, tokens)
    with pytest.raises(ValueError, match="at least 1"):
        prep.warm_up(0)


def test_warm_up_stops_at_its_budget(core: Any, standin_onnx: Path) -> None:
    """With no time left nothing starts: every pass is counted as left to the first requests."""
    prep = preparer(core, standin_onnx)
    done = prep.warm_up(5, budget_s=0.0)
    assert done.passes == 0 and done.skipped == 10 and done.graphs_captured == 0
    assert prep.warm_up(2, budget_s=1e9).skipped == 0


def test_own_shape_graphs_are_the_default_and_the_cpu_runs_them_eagerly(
    core: Any, wavs: list[Path], upstream: list[tuple[Any, torch.Tensor]], standin_onnx: Path
) -> None:
    """The TF32 policy's route captures a graph per mel length on CUDA by default (issue 30); on
    the CPU there are no graphs: its warm-up captures none and the route still gives vllm-omni's
    tokens."""
    prep = preparer(core, standin_onnx, route="own-shapes")
    assert prep.own_shape_graphs and prep._tokens.own_shape_graphs
    assert not prep._tokens.own_graph_frames(400)  # the CPU
    done = prep.warm_up(2)
    assert done.route == "own-shapes" and done.graphs_captured == 0 and prep._tokens.graphs == 0
    got, _ = prep.prepare([decoded(p) for p in wavs[:2]])
    for out, ((tokens, *_), _) in zip(got, upstream[:2], strict=True):
        assert out is not None and torch.equal(out.speech_tokens, tokens)


def test_the_tokenizers_inputs_are_checked(core: Any) -> None:
    """A wrong dtype, shape or plan raises a Python error before any copy or launch."""
    from omni_deploy.speaker.refprep.s3_tokens import S3Batcher

    batcher = S3Batcher(core.audio_tokenizer, torch.device("cpu"))
    plan_ = batcher.plan([100, 60])
    ints = torch.from_numpy(plan_.ints)
    mels = torch.zeros(2, 128, 100)
    batcher.run(plan_, mels, ints)  # as planned: runs
    with pytest.raises(ValueError, match="dtype"):
        batcher.run(plan_, mels.to(torch.bfloat16), ints)
    with pytest.raises(ValueError, match="frames"):
        batcher.run(plan_, torch.zeros(2, 128, 50), ints)
    with pytest.raises(ValueError, match="shape"):
        batcher.run(plan_, mels, ints[:-1])
    apart = batcher.plan([100, 60], own_shapes=True)
    with pytest.raises(ValueError, match="voice 1"):
        batcher.run(apart, [torch.zeros(1, 128, 100), torch.zeros(1, 128, 61)], torch.from_numpy(apart.ints))

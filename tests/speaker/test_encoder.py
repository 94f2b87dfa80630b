"""The public encoder API and its contracts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from omni_deploy.speaker import load_encoder
from omni_deploy.speaker.fbank import fbank, resample
from omni_deploy.speaker.precision import precision_scope


def test_api_shapes_and_sharing(standin_onnx: Path) -> None:
    encoder = load_encoder(str(standin_onnx), device="cpu")
    assert encoder is load_encoder(str(standin_onnx), device="cpu")
    feats = [torch.randn(n, 80) for n in (120, 598)]
    assert encoder.embed_features(feats).shape == (2, 192)
    # vllm-omni's contract: [T, 80] in, [1, 192] out on the encoder's device.
    out = encoder(feats[0])
    assert out.shape == (1, 192) and out.device.type == "cpu"
    assert torch.allclose(out[0], encoder.embed_features(feats)[0], atol=1e-5)
    assert encoder.embed_features([]).shape == (0, 192)


def test_raw_output_matches_onnx_runtime(standin_onnx: Path, ort) -> None:  # type: ignore[no-untyped-def]
    encoder = load_encoder(str(standin_onnx), device="cpu")
    feat = torch.randn(300, 80)
    feat -= feat.mean(0)
    expected = ort.run(None, {"input": feat[None].numpy()})[0]
    got = encoder(feat).numpy()
    assert np.linalg.norm(got) > 1.5  # not normalised, like the ONNX model
    assert np.allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_waveforms_are_resampled_then_featurised(standin_onnx: Path) -> None:
    encoder = load_encoder(str(standin_onnx), device="cpu")
    wave = torch.randn(24000 * 2) * 0.1
    direct = encoder.embed_waveforms([wave], 24000)
    manual = encoder.embed_features(fbank([resample(wave, 24000, 16000)]))
    assert torch.allclose(direct, manual)


def test_bad_features_are_refused(standin_onnx: Path) -> None:
    encoder = load_encoder(str(standin_onnx), device="cpu")
    with pytest.raises(ValueError, match=r"\[T, 80\]"):
        encoder(torch.randn(100, 40))
    with pytest.raises(ValueError, match="at least 2"):
        encoder(torch.randn(1, 80))


def test_more_than_the_largest_batch_bucket(standin_onnx: Path) -> None:
    encoder = load_encoder(str(standin_onnx), device="cpu")
    feats = [torch.randn(60 + i, 80) for i in range(34)]
    out = encoder.embed_features(feats)
    assert out.shape == (34, 192)
    assert torch.allclose(out[33], encoder(feats[33])[0], atol=1e-5)


def test_precision_scope_restores_the_callers_flags() -> None:
    before = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.backends.cudnn.benchmark,
    )
    with precision_scope(allow_tf32=not before[0], cudnn_tf32=not before[1]):
        assert torch.backends.cuda.matmul.allow_tf32 is (not before[0])
        assert torch.backends.cudnn.allow_tf32 is (not before[1])
        assert torch.backends.cudnn.benchmark is False
    with precision_scope(allow_tf32=True):
        assert torch.backends.cudnn.allow_tf32 is before[1]  # cuDNN's own flag left alone
    after = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.backends.cudnn.benchmark,
    )
    assert after == before


class _ReplayStandIn:
    """Stand-in for a CUDA graph on a CPU-only machine: replay re-runs the captured function on
    the same static tensors and writes into the same output, as a real replay would."""

    def __init__(self, fn, output: torch.Tensor) -> None:  # type: ignore[no-untyped-def]
        self.fn, self.output, self.replays = fn, output, 0

    def replay(self) -> None:
        self.output.copy_(self.fn())
        self.replays += 1


@pytest.fixture(params=["device items", "host items"])
def graphed_cpu_encoder(standin_onnx: Path, monkeypatch: pytest.MonkeyPatch, request):  # type: ignore[no-untyped-def]
    """The graph path on the CPU: replays re-run the forward on the graph's own buffers. With
    "host items", inputs go through the staging buffer and one copy, as CPU items do on CUDA."""
    from omni_deploy.speaker import encoder as enc

    def record(self, fn):  # type: ignore[no-untyped-def]
        output = fn().clone()
        return _ReplayStandIn(fn, output), output

    monkeypatch.setattr(enc.SpeakerEncoder, "_record", record)
    monkeypatch.setattr(enc.SpeakerEncoder, "_use_graphs", lambda self: True)
    monkeypatch.setattr(enc.SpeakerEncoder, "_from_host", lambda self, items: request.param == "host items")
    model = load_encoder(str(standin_onnx), device="cpu").model
    return enc.SpeakerEncoder(model, str(standin_onnx))


def test_graph_buckets_reuse_and_leftovers(graphed_cpu_encoder) -> None:  # type: ignore[no-untyped-def]
    encoder = graphed_cpu_encoder
    g = torch.Generator().manual_seed(5)
    eager = load_encoder(encoder.source, device="cpu")
    first = [torch.randn(n, 80, generator=g) for n in (598, 130, 401)]
    second = [torch.randn(n, 80, generator=g) for n in (90, 260)]  # shorter: leftovers in the buffer
    for feats in (first, second, first[:1]):
        got = encoder.embed_features(feats)
        assert torch.allclose(got, eager.embed_features(feats), atol=1e-4)
    # Batch buckets 4, 2 and 1; length buckets 600 and 400 (600 again for the single 598).
    assert sorted(encoder._graphs) == [("features", 1, 600), ("features", 2, 400), ("features", 4, 600)]


def test_waveform_graphs_hold_the_front_end(graphed_cpu_encoder) -> None:  # type: ignore[no-untyped-def]
    encoder = graphed_cpu_encoder
    g = torch.Generator().manual_seed(6)
    eager = load_encoder(encoder.source, device="cpu")
    waves = [torch.randn(n, generator=g) * 0.1 for n in (96000, 20000, 48000)]
    # 96399 samples are 600 frames and 159 samples more than those frames read: the most a
    # 600-frame graph's slot of 96240 samples can be asked to take.
    longest = [torch.randn(96399, generator=g) * 0.1 for _ in range(2)]
    for batch in (waves, waves[1:2], waves[:2], longest):
        got = encoder.embed_waveforms(batch, 16000)
        expected = eager.embed_features(fbank(batch))
        assert torch.allclose(got, expected, atol=1e-4), (got - expected).abs().max()
    assert {key[0] for key in encoder._graphs} == {"waveforms"}
    # 96000 samples are 598 frames: the 600-frame bucket, whose buffer holds 96240 samples.
    graph = encoder._graphs[("waveforms", 4, 600)]
    assert (graph.batch, graph.width, graph.row) == (4, 96240, 1)
    assert graph.inputs.shape == (4 * 4 + 4 * 96240,)
    with pytest.raises(ValueError, match="at least 2 feature frames"):
        encoder.embed_waveforms([torch.zeros(500)], 16000)


def test_the_encoder_ignores_the_default_dtype_and_device_context(standin_onnx: Path) -> None:
    """The take-over runs under vLLM's loader: bf16 as torch's default dtype, maybe a device context.
    Every buffer the encoder makes names its dtype (issue 29: a bf16 staging buffer halved the
    graph's int64 header, and the eager path mixed bf16 input with float32 biases)."""
    import torch

    from omni_deploy.speaker.encoder import SpeakerEncoder, get_encoder

    encoder = get_encoder(str(standin_onnx), device="cpu", backend="torch")
    feats = torch.randn(300, 80, generator=torch.Generator(device="cpu").manual_seed(2)).to(torch.bfloat16)
    expected = encoder(feats.float())
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cpu"):
            got = encoder(feats.float())
            bf16_input = encoder(feats)
            inputs, staging, _ = SpeakerEncoder._buffers(encoder, 4, 200, 80)
            waves = encoder.embed_waveforms([torch.randn(16000, dtype=torch.float32)], 16000)
    finally:
        torch.set_default_dtype(previous)
    assert got.dtype == bf16_input.dtype == waves.dtype == torch.float32
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(bf16_input, expected, rtol=1e-5, atol=1e-5)
    assert staging.dtype == inputs.dtype == torch.float32 and staging.numel() == 4 * 4 + 4 * 200 * 80
    assert staging[:16].view(torch.int64)[:4].tolist() == [200] * 4  # the whole int64 header fits

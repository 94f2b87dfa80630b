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

"""Our fused CAM++ against ONNX Runtime, and batched against one-by-one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from omni_deploy.speaker.eager_baseline import reference_from_weights
from omni_deploy.speaker.fused_model import FusedCampplus, padded_length
from omni_deploy.speaker.onnx_weights import read_weights
from omni_deploy.speaker.standin import build_reference


@pytest.fixture(scope="module")
def model(standin_onnx: Path) -> FusedCampplus:
    return FusedCampplus(read_weights(standin_onnx))


def _features(frames: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(frames, 80, generator=g) * 2.0 + torch.linspace(-1, 1, 80)
    return feats - feats.mean(0, keepdim=True)


def _normalised(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _ours(model: FusedCampplus, feats: list[torch.Tensor]) -> np.ndarray:
    frames = padded_length(max(f.shape[0] for f in feats))
    padded = torch.zeros(len(feats), frames, 80)
    for i, f in enumerate(feats):
        padded[i, : f.shape[0]] = f
    with torch.no_grad():
        return model(padded, torch.tensor([f.shape[0] for f in feats])).numpy()


# Input frames T give T' = ceil(T / 2) frames after the TDNN; CAM segments are 100 frames of T'.
# 150 -> 75 (< 100), 199/200 -> 100, 201 -> 101, 400 -> 200 (100k), 401/402 -> 201 (100k + 1).
FRAMES = [40, 150, 199, 200, 201, 400, 401, 402, 598]


@pytest.mark.parametrize("frames", FRAMES)
def test_parity_with_onnx_runtime(model: FusedCampplus, ort, frames: int) -> None:  # type: ignore[no-untyped-def]
    feats = _features(frames, seed=frames)
    expected = ort.run(None, {"input": feats[None].numpy()})[0]
    ours = _ours(model, [feats])
    assert np.abs(_normalised(ours) - _normalised(expected)).max() <= 1e-5
    assert np.allclose(ours, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_batched_equals_one_by_one(model: FusedCampplus) -> None:
    feats = [_features(n, seed=n + 1) for n in (598, 40, 201, 399, 100, 555)]
    batched = _ours(model, feats)
    single = np.concatenate([_ours(model, [f]) for f in feats])
    assert np.abs(_normalised(batched) - _normalised(single)).max() <= 1e-5


def test_padding_beyond_the_bucket_changes_nothing(model: FusedCampplus) -> None:
    feats = _features(180, seed=3)
    tight = _ours(model, [feats])
    padded = torch.zeros(1, 1000, 80)
    padded[0, :180] = feats
    # Garbage in padded frames must not leak either: masks decide, not zeros.
    padded[0, 180:] = 5.0
    with torch.no_grad():
        loose = model(padded, torch.tensor([180])).numpy()
    assert np.abs(_normalised(loose) - _normalised(tight)).max() <= 1e-5


def test_eager_baseline_is_the_same_function(standin_onnx: Path) -> None:
    baseline = reference_from_weights(read_weights(standin_onnx))
    reference = build_reference(seed=0)
    feats = _features(300, seed=9)[None]
    with torch.no_grad():
        assert torch.allclose(baseline(feats), reference(feats), atol=1e-4, rtol=1e-4)


def test_reference_matches_3d_speaker_when_installed() -> None:
    """An independent check of the architecture: 3D-Speaker's own module, if available."""
    dtdnn = pytest.importorskip("speakerlab.models.campplus.DTDNN")
    theirs = dtdnn.CAMPPlus(feat_dim=80, embedding_size=192).eval()
    ours = build_reference(seed=0)
    assert set(theirs.state_dict()) == set(ours.state_dict())
    theirs.load_state_dict(ours.state_dict())
    feats = _features(250, seed=4)[None]
    with torch.no_grad():
        assert torch.allclose(theirs(feats), ours(feats), atol=1e-5)


def test_a_folded_affine_free_norm_is_handled_by_both_models(standin_onnx: Path) -> None:
    """Exports may fold the final affine-free norm into the dense conv; both models must cope."""
    weights = read_weights(standin_onnx)
    norm = weights.affines.pop("xvector.dense.nonlinear.batchnorm")
    conv = weights.convs["xvector.dense.linear"]
    conv.weight = conv.weight * norm.scale[:, None, None]
    conv.bias = norm.shift.copy()
    feats = _features(250, seed=5)
    fused = _ours(FusedCampplus(weights), [feats])
    with torch.no_grad():
        eager = reference_from_weights(weights)(feats[None]).numpy()
    assert np.abs(_normalised(fused) - _normalised(eager)).max() <= 1e-5

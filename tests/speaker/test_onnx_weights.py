"""Loading CAM++ weights from campplus.onnx by node scope, with full coverage both ways."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from omni_deploy.speaker.fused_model import FusedCampplus
from omni_deploy.speaker.onnx_weights import SpeakerModelError, read_weights, scope_of
from omni_deploy.speaker.standin import summarize


def test_standin_has_the_structure_of_the_real_file(standin_onnx: Path) -> None:
    summary = summarize(standin_onnx)
    assert summary.batchnorm_nodes == 56
    assert summary.avgpool_nodes == 52
    assert 3000 <= summary.nodes <= 3300
    assert 27e6 <= summary.size_bytes <= 29.5e6
    # Folded convs carry opaque initializer names: the loader must not depend on them.
    model = onnx.load(str(standin_onnx))
    assert any(i.name.startswith("onnx::Conv_") for i in model.graph.initializer)


def test_scope_of_node_names() -> None:
    assert scope_of("/head/layer1/layer1.0/conv1/Conv") == "head.layer1.0.conv1"
    assert scope_of("/head/layer2/layer2.0/shortcut/shortcut.0/Conv") == "head.layer2.0.shortcut.0"
    assert scope_of("/xvector/block1/tdnnd1/linear1/Conv") == "xvector.block1.tdnnd1.linear1"


def test_every_layer_is_mapped(standin_onnx: Path) -> None:
    weights = read_weights(standin_onnx)
    assert len(weights.convs) == 225
    assert len(weights.affines) == 56
    # The dense norm's scale and shift live in Constant nodes.
    assert "xvector.dense.nonlinear.batchnorm" in weights.affines
    FusedCampplus(weights)  # raises unless every layer is present and every tensor used


def test_truncated_file_is_refused(standin_onnx: Path, tmp_path: Path) -> None:
    broken = tmp_path / "truncated.onnx"
    broken.write_bytes(standin_onnx.read_bytes()[:5_000_000])
    with pytest.raises(SpeakerModelError, match="not a readable ONNX model"):
        read_weights(broken)


def _edit(standin_onnx: Path, tmp_path: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    model = onnx.load(str(standin_onnx))
    edit(model.graph)
    out = tmp_path / "edited.onnx"
    onnx.save(model, str(out))
    return out


def test_renamed_layer_is_refused(standin_onnx: Path, tmp_path: Path) -> None:
    def rename(graph) -> None:  # type: ignore[no-untyped-def]
        node = next(n for n in graph.node if n.name == "/xvector/block2/tdnnd5/linear1/Conv")
        node.name = "/xvector/block2/tdnnd5/linear_renamed/Conv"

    path = _edit(standin_onnx, tmp_path, rename)
    with pytest.raises(SpeakerModelError, match="linear_renamed"):
        FusedCampplus(read_weights(path))


def test_missing_layer_is_refused(standin_onnx: Path, tmp_path: Path) -> None:
    def drop(graph) -> None:  # type: ignore[no-untyped-def]
        node = next(n for n in graph.node if n.name == "/xvector/block3/tdnnd2/cam_layer/linear_local/Conv")
        graph.node.remove(node)

    path = _edit(standin_onnx, tmp_path, drop)
    with pytest.raises(SpeakerModelError, match="not used by any conv"):
        read_weights(path)


def test_missing_batch_norm_is_refused(standin_onnx: Path, tmp_path: Path) -> None:
    def rename_bn(graph) -> None:  # type: ignore[no-untyped-def]
        node = next(
            n for n in graph.node if n.name == "/xvector/transit1/nonlinear/batchnorm/BatchNormalization"
        )
        node.name = "/xvector/transit1/other/batchnorm/BatchNormalization"

    path = _edit(standin_onnx, tmp_path, rename_bn)
    with pytest.raises(SpeakerModelError, match="CAM\\+\\+ does not have"):
        FusedCampplus(read_weights(path))


def test_wrong_dimensions_are_refused(standin_onnx: Path, tmp_path: Path) -> None:
    from onnx import numpy_helper

    def shrink(graph) -> None:  # type: ignore[no-untyped-def]
        node = next(n for n in graph.node if n.name == "/xvector/dense/linear/Conv")
        init = next(i for i in graph.initializer if i.name == node.input[1])
        array = numpy_helper.to_array(init)[:128]
        init.CopyFrom(numpy_helper.from_array(array, init.name))

    path = _edit(standin_onnx, tmp_path, shrink)
    with pytest.raises(SpeakerModelError, match="needs \\(192, 1024, 1\\)"):
        FusedCampplus(read_weights(path))


def test_missing_file() -> None:
    with pytest.raises(SpeakerModelError, match="no such file"):
        read_weights("/nonexistent/campplus.onnx")


def test_layers_sharing_an_equal_bias_are_read_through_identity(tmp_path: Path) -> None:
    """The exporter writes a bias that two layers hold with equal values once and feeds the second
    layer through an Identity node: a valid export of the same model that must load."""
    import numpy as np
    import torch

    from omni_deploy.speaker.parity import ort_session
    from omni_deploy.speaker.standin import build_reference, export_module

    model = build_reference(seed=0)
    modules = dict(model.named_modules())
    shared = ("xvector.block1.tdnnd1.cam_layer.linear1", "xvector.block2.tdnnd4.cam_layer.linear1")
    with torch.no_grad():
        modules[shared[1]].bias.copy_(modules[shared[0]].bias)
    path = tmp_path / "shared-bias.onnx"
    export_module(model, path)
    graph = onnx.load(str(path)).graph
    assert any(n.op_type == "Identity" for n in graph.node), "the exporter no longer writes Identity nodes"

    weights = read_weights(path)
    bias = modules[shared[0]].bias.detach().numpy()
    for scope in shared:
        assert np.array_equal(weights.convs[scope].bias, bias)
    encoder = FusedCampplus(weights)
    feat = torch.randn(300, 80, generator=torch.Generator().manual_seed(3))
    session = ort_session(str(path))
    expected = session.run(None, {"input": feat[None].numpy()})[0]
    padded = torch.zeros(1, 400, 80)  # the fused model takes multiples of 200 frames
    padded[0, :300] = feat
    with torch.no_grad():
        got = encoder(padded, torch.tensor([300])).numpy()
    assert np.allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_weights_behind_cast_and_reshape_are_followed(standin_onnx: Path, tmp_path: Path) -> None:
    """A weight stored flat in float64, then Cast and Reshaped before its conv, loads unchanged."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    conv_name = "/xvector/dense/linear/Conv"

    def store_flat(graph) -> None:  # type: ignore[no-untyped-def]
        index, node = next((i, n) for i, n in enumerate(graph.node) if n.name == conv_name)
        init = next(i for i in graph.initializer if i.name == node.input[1])
        array = numpy_helper.to_array(init)
        graph.initializer.remove(init)
        graph.initializer.extend(
            [
                numpy_helper.from_array(array.astype(np.float64).reshape(-1), "dense_flat64"),
                numpy_helper.from_array(np.array([192, -1, 1], dtype=np.int64), "dense_shape"),
            ]
        )
        chain = [
            helper.make_node("Cast", ["dense_flat64"], ["dense_f32"], to=TensorProto.FLOAT, name="cast_w"),
            helper.make_node("Reshape", ["dense_f32", "dense_shape"], ["dense_w"], name="reshape_w"),
            helper.make_node("Identity", ["dense_w"], [node.input[1]], name="identity_w"),
        ]
        for offset, extra in enumerate(chain):
            graph.node.insert(index + offset, extra)

    original = read_weights(standin_onnx).convs["xvector.dense.linear"].weight
    weights = read_weights(_edit(standin_onnx, tmp_path, store_flat))
    assert np.array_equal(weights.convs["xvector.dense.linear"].weight, original)
    FusedCampplus(weights)  # every layer present, the float64 initializer counted as used


def test_a_weight_computed_by_another_op_is_refused_with_its_op(standin_onnx: Path, tmp_path: Path) -> None:
    from onnx import helper

    def negate(graph) -> None:  # type: ignore[no-untyped-def]
        index, node = next((i, n) for i, n in enumerate(graph.node) if n.name == "/xvector/dense/linear/Conv")
        graph.node.insert(index, helper.make_node("Neg", [node.input[1]], ["negated"], name="neg_w"))
        node.input[1] = "negated"

    with pytest.raises(SpeakerModelError, match="computed by a Neg node"):
        read_weights(_edit(standin_onnx, tmp_path, negate))

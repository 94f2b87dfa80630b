"""Hostile campplus.onnx files for the spk cases, built small with onnx.helper (`onnx: PATH, kind: K`).

Kinds: truncated, empty, garbage, invalid_graph (a node reads a tensor nothing defines),
inf_weights (a weight holding inf and NaN), long_node_name (a CAM++-scoped node named with 1 MB),
conv_one_input and batchnorm_short (CAM++-scoped nodes our loader indexes into), and
`external:LOCATION` (an initializer whose data lives in LOCATION: an absolute path such as
/etc/passwd or /dev/zero, or `../x.bin` outside the model's folder).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _tiny(nodes: list[Any], initializers: list[Any], inputs: list[str]) -> Any:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes,
        "hostile",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in inputs],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)],
        initializer=initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _weight(name: str, values: int = 4) -> Any:
    from onnx import TensorProto, helper

    return helper.make_tensor(name, TensorProto.FLOAT, [values, 1, 1], [0.5] * values)


def _valid() -> Any:
    from onnx import helper

    node = helper.make_node("Add", ["x", "w"], ["y"], name="/xvector/add/Add")
    return _tiny([node], [_weight("w")], ["x"])


def _inf_weights() -> Any:
    """A valid graph whose weight holds +inf and NaN."""
    from onnx import TensorProto, helper

    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 1, 1], [0.5, float("inf"), float("nan"), 1.0])
    node = helper.make_node("Add", ["x", "w"], ["y"], name="/xvector/add/Add")
    return _tiny([node], [weight], ["x"])


def _long_node_name() -> Any:
    """A graph ONNX Runtime loads whose Conv node and a weight it leaves unused are named with 1 MB."""
    from onnx import TensorProto, helper

    long = "n" * 1_000_000
    node = helper.make_node("Conv", ["x", "w"], ["y"], name=f"/xvector/block1/{long}/Conv")
    weight = helper.make_tensor("w", TensorProto.FLOAT, [1, 1, 1], [0.5])
    unused = helper.make_tensor(f"u{long}", TensorProto.FLOAT, [2], [0.5, 0.5])
    return _tiny([node], [weight, unused], ["x"])


def _conv_one_input() -> Any:
    from onnx import helper

    node = helper.make_node("Conv", ["x"], ["y"], name="/xvector/block1/tdnnd1/linear1/Conv")
    return _tiny([node], [], ["x"])


_ROUND3 = {"inf_weights": _inf_weights, "long_node_name": _long_node_name, "conv_one_input": _conv_one_input}


def write_onnx(path: Path, kind: str, scratch: Any) -> None:
    from onnx import TensorProto, helper

    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "garbage":
        path.write_bytes(bytes(range(256)) * 64)
    elif kind == "truncated":
        data = _valid().SerializeToString()
        path.write_bytes(data[: len(data) // 2])
    elif kind == "invalid_graph":
        node = helper.make_node("Add", ["x", "nowhere"], ["y"], name="/xvector/add/Add")
        path.write_bytes(_tiny([node], [], ["x"]).SerializeToString())
    elif kind == "batchnorm_short":
        node = helper.make_node(
            "BatchNormalization", ["x", "w"], ["y"], name="/xvector/block1/tdnnd1/nonlinear1/batchnorm/BN"
        )
        path.write_bytes(_tiny([node], [_weight("w")], ["x"]).SerializeToString())
    elif kind in _ROUND3:
        path.write_bytes(_ROUND3[kind]().SerializeToString())
    elif kind.startswith("external:"):
        location = scratch.fill(kind.split(":", 1)[1])
        if location.startswith("../"):
            (path.parent / location).write_bytes(b"\0" * 16)
        weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 1, 1], [0.0] * 4)
        weight.ClearField("float_data")
        weight.data_location = TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", "0"), ("length", "16")):
            entry = weight.external_data.add()
            entry.key, entry.value = key, value
        node = helper.make_node("Add", ["x", "w"], ["y"], name="/xvector/add/Add")
        path.write_bytes(_tiny([node], [weight], ["x"]).SerializeToString())
    else:
        raise AssertionError(f"unknown onnx kind {kind}")

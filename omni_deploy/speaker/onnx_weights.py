"""Read CAM++ weights straight from campplus.onnx, by node scope.

The exporter folds every BatchNorm that directly follows a conv into that conv and gives the
folded tensors opaque names (`onnx::Conv_4423`, renumbered on every export). Node names keep the
module path (`/xvector/block1/tdnnd1/linear1/Conv`), so we map by node, never by initializer
name. BatchNorms that survive (those before a conv, and the final affine-free one) are read from
their node's inputs, which may be initializers or Constant nodes. An input may also reach its node
through Identity, Cast or Reshape nodes over an initializer: the TorchScript exporter writes a
tensor that several layers hold with equal values once and feeds the other layers through
Identity nodes. Those chains are followed back to the initializer.

The result is checked both ways before anything is returned: every Conv and BatchNormalization
node belongs to a CAM++ layer, every weight tensor of the file is used, and every layer of CAM++
is present with the right shape. A file that fails gets a SpeakerModelError saying what did not
match; a partial model is never built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from omni_deploy.speaker.onnx_file import SpeakerModelError, load_model

__all__ = ["SpeakerModelError", "read_weights"]


@dataclass
class ConvWeights:
    weight: np.ndarray
    bias: np.ndarray | None


@dataclass
class AffineWeights:
    """An eval-mode BatchNorm as y = x * scale + shift (per channel)."""

    scale: np.ndarray
    shift: np.ndarray


@dataclass
class CampplusWeights:
    convs: dict[str, ConvWeights] = field(default_factory=dict)
    affines: dict[str, AffineWeights] = field(default_factory=dict)
    source: str = ""


def scope_of(node_name: str) -> str:
    """`/head/layer1/layer1.0/conv1/Conv` -> `head.layer1.0.conv1`."""
    parts = [p for p in node_name.split("/") if p][:-1]
    path: list[str] = []
    previous = ""
    for part in parts:
        if previous and part.startswith(previous + "."):
            path.append(part[len(previous) + 1 :])
        else:
            path.append(part)
        previous = part
    return ".".join(path)


# Nodes that only pass a stored tensor on (possibly retyped or reshaped): followed to the source.
PASS_THROUGH = ("Identity", "Cast", "Reshape")


@dataclass
class TensorTable:
    """Every tensor of the graph known without running it, and the initializers each comes from."""

    values: dict[str, np.ndarray] = field(default_factory=dict)
    sources: dict[str, frozenset[str]] = field(default_factory=dict)
    producers: dict[str, str] = field(default_factory=dict)  # output name -> op type, for messages


def _reshaped(data: np.ndarray, shape: np.ndarray, allow_zero: bool) -> np.ndarray:
    """ONNX Reshape: a 0 copies the input's dimension (unless allowzero), one -1 is inferred."""
    dims = [int(d) for d in shape.reshape(-1)]
    if not allow_zero:
        dims = [data.shape[i] if d == 0 and i < data.ndim else d for i, d in enumerate(dims)]
    return data.reshape(dims)


def _pass_through(node: Any, table: TensorTable) -> np.ndarray | None:
    """The value of an Identity, Cast or Reshape node whose inputs are all known, else None."""
    from onnx import helper

    if any(name not in table.values for name in node.input if name):
        return None
    data = table.values[node.input[0]]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "Identity":
        return data
    if node.op_type == "Cast":
        return data.astype(helper.tensor_dtype_to_np_dtype(int(attrs["to"])))
    return _reshaped(data, table.values[node.input[1]], bool(attrs.get("allowzero", 0)))


def _tensor_table(graph: Any) -> TensorTable:
    from onnx import numpy_helper

    table = TensorTable()
    for init in graph.initializer:
        table.values[init.name] = numpy_helper.to_array(init)
        table.sources[init.name] = frozenset([init.name])
    # Nodes are stored in topological order, so one pass resolves chains of any length.
    for node in graph.node:
        for output in node.output:
            table.producers[output] = node.op_type
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            table.values[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
            table.sources[node.output[0]] = frozenset()
        elif node.op_type in PASS_THROUGH and node.input:
            value = _pass_through(node, table)
            if value is not None:
                table.values[node.output[0]] = value
                table.sources[node.output[0]] = frozenset().union(
                    *(table.sources[name] for name in node.input if name)
                )
    return table


# Inputs a node must have for the loader to read its weights: Conv (X, W[, B]), BatchNorm (X, 4 stats).
_MIN_INPUTS = {"Conv": 2, "BatchNormalization": 5}


def _check_inputs(node: Any, path: str | Path) -> None:
    wanted = _MIN_INPUTS.get(node.op_type)
    if wanted is not None and (len(node.input) < wanted or not all(node.input[1:wanted])):
        raise SpeakerModelError(
            f"{path}: {node.op_type} node {node.name!r} has {len(node.input)} input(s), needs {wanted}; "
            "this is not the CAM++ graph omni-deploy knows"
        )


def read_weights(path: str | Path) -> CampplusWeights:
    """All conv and affine tensors of a CAM++ ONNX graph, keyed by module scope."""
    import onnx

    model = load_model(path)  # guarded: a regular file, external data only from its own folder
    graph = model.graph
    tensors = _tensor_table(graph)
    weights = CampplusWeights(source=str(path))
    used: set[str] = set()

    def take(name: str, what: str) -> np.ndarray:
        if name not in tensors.values:
            made_by = tensors.producers.get(name)
            raise SpeakerModelError(
                f"{path}: {what} reads {name!r}, which is neither an initializer nor a constant"
                + (f" (it is computed by a {made_by} node)" if made_by else "")
            )
        used.update(tensors.sources[name])
        return np.array(tensors.values[name], dtype=np.float32)  # a writable copy

    for node in graph.node:
        _check_inputs(node, path)
        if node.op_type == "Conv":
            scope = scope_of(node.name)
            if scope in weights.convs:
                raise SpeakerModelError(f"{path}: two Conv nodes share the scope {scope!r}")
            bias = take(node.input[2], node.name) if len(node.input) > 2 and node.input[2] else None
            weights.convs[scope] = ConvWeights(take(node.input[1], node.name), bias)
        elif node.op_type == "BatchNormalization":
            scope = scope_of(node.name)
            eps = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5)
            gamma, beta, mean, var = (take(name, node.name) for name in node.input[1:5])
            scale = (gamma / np.sqrt(var.astype(np.float64) + eps)).astype(np.float32)
            weights.affines[scope] = AffineWeights(scale, (beta - mean * scale).astype(np.float32))
    weight_like = {
        init.name
        for init in graph.initializer
        if init.data_type == onnx.TensorProto.FLOAT and len(init.dims) >= 1
    }
    unused = sorted(n for n in weight_like - used if int(np.prod(tensors.values[n].shape)) > 1)
    if unused:
        shown = ", ".join(unused[:5]) + (" ..." if len(unused) > 5 else "")
        raise SpeakerModelError(
            f"{path}: {len(unused)} weight tensor(s) are not used by any conv or batch norm ({shown}); "
            "this is not the CAM++ graph omni-deploy knows"
        )
    return weights

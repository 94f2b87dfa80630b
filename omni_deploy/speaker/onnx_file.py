"""Open campplus.onnx once, guarded, for both readers of it (our loader and ONNX Runtime).

The file is read through omni_deploy.guarded (a regular file, at most MAX_MODEL_BYTES: a FIFO or
`/dev/zero` is a message, never a hang). A tensor may keep its data in another file
("external data"); its location must be a relative path that stays inside the model's folder
(after symlinks) and names a regular file: `/etc/passwd`, `/dev/zero` or `../x` are refused.
That data is then read by us, through the same guarded reader, and put into the model, so
neither onnx's loader nor ONNX Runtime ever opens a path the file names. ONNX Runtime gets the
checked model as bytes; any error of either (a truncated protobuf, an invalid graph) is a
SpeakerModelError, a message and exit 1.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omni_deploy import guarded

MAX_MODEL_BYTES = 1024 * 1024 * 1024  # campplus.onnx is 28 MB; a stand-in about the same


class SpeakerModelError(Exception):
    """campplus.onnx cannot be read, or is not a CAM++ graph the loader can map completely."""


def _tensors(graph: Any) -> Iterator[Any]:
    """Every tensor a graph holds, subgraphs included (where external data may hide)."""
    stack = [graph]
    while stack:
        current = stack.pop()
        yield from current.initializer
        for sparse in current.sparse_initializer:
            yield sparse.values
            yield sparse.indices
        for node in current.node:
            for attribute in node.attribute:
                if attribute.HasField("t"):
                    yield attribute.t
                yield from attribute.tensors
                if attribute.HasField("g"):
                    stack.append(attribute.g)
                stack.extend(attribute.graphs)


def _inside(folder: Path, location: str, where: str) -> Path:
    if not location or os.path.isabs(location) or ".." in Path(location).parts or "\0" in location:
        raise SpeakerModelError(
            f"{where}: external data at {location!r} is refused: it must be a relative path inside the "
            "model's folder"
        )
    target = folder / location
    real_folder, real = os.path.realpath(folder), os.path.realpath(target)
    if os.path.commonpath([real_folder, real]) != real_folder:
        raise SpeakerModelError(
            f"{where}: external data {location!r} leads outside the model's folder ({real})"
        )
    return target


def _inline_external(model: Any, path: Path) -> None:
    from onnx import TensorProto

    folder = path.parent
    files: dict[Path, bytes] = {}
    total = 0
    for tensor in _tensors(model.graph):
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        where = f"{path}: tensor {tensor.name!r}"
        info = {entry.key: entry.value for entry in tensor.external_data}
        target = _inside(folder, info.get("location", ""), where)
        try:
            offset, length = int(info.get("offset", "0")), info.get("length")
            size = int(length) if length is not None else None
        except ValueError:
            raise SpeakerModelError(f"{where}: external data offset/length are not integers") from None
        if target not in files:
            try:
                files[target] = guarded.read_bytes(target, str(target), MAX_MODEL_BYTES)
            except guarded.Refused as refused:
                raise SpeakerModelError(f"{where}: external data: {refused}") from None
            total += len(files[target])
            if total > MAX_MODEL_BYTES:
                raise SpeakerModelError(f"{path}: external data beyond {MAX_MODEL_BYTES} bytes")
        data = files[target]
        end = len(data) if size is None else offset + size
        if offset < 0 or end > len(data) or end < offset:
            raise SpeakerModelError(f"{where}: external data range {offset}..{end} is outside {target}")
        tensor.raw_data = data[offset:end]
        tensor.data_location = TensorProto.DEFAULT
        del tensor.external_data[:]


def load_model(path: str | os.PathLike[str]) -> Any:
    """The ONNX model at `path`, external data checked and inlined (SpeakerModelError if not)."""
    import onnx

    source = Path(path)
    try:
        data = guarded.read_bytes(source, str(source), MAX_MODEL_BYTES)
    except guarded.Refused as refused:
        raise SpeakerModelError(str(refused)) from None
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf's DecodeError and friends, for damaged files
        raise SpeakerModelError(
            f"{source}: not a readable ONNX model ({type(exc).__name__}: {exc})"
        ) from None
    if not model.HasField("graph"):
        raise SpeakerModelError(f"{source}: not an ONNX model (it has no graph)")
    _inline_external(model, source)
    return model


def ort_session(path: str | os.PathLike[str], threads: int | None = None) -> Any:
    """An ONNX Runtime CPU session of the checked model (made from bytes, never from a path)."""
    import onnxruntime

    model = load_model(path)
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
    try:
        return onnxruntime.InferenceSession(
            model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # InvalidGraph, InvalidProtobuf, Fail, NotImplemented: all ORT's own
        message = str(exc).splitlines()[0][:400] if str(exc) else type(exc).__name__
        raise SpeakerModelError(f"{path}: ONNX Runtime cannot load it: {message}") from None

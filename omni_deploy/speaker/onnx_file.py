"""Open campplus.onnx once, guarded, for both readers of it (our loader and ONNX Runtime).

The file is read through omni_deploy.common.guarded (a regular file, at most MAX_MODEL_BYTES: a FIFO or
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

from omni_deploy.common import guarded

MAX_MODEL_BYTES = 1024 * 1024 * 1024  # campplus.onnx is 28 MB; a stand-in about the same


MAX_WORD = 160  # characters of one name (a node's, a tensor's) a message shows
MAX_MESSAGE = 2000


class SpeakerModelError(Exception):
    """campplus.onnx cannot be read, or is not a CAM++ graph the loader can map completely.

    Its text is bounded whatever it quotes: a name of more than MAX_WORD characters (a node named
    with 1 MB) is cut and its length said, and the whole message stops at MAX_MESSAGE."""

    def __str__(self) -> str:
        return bounded(super().__str__())


def bounded(text: str) -> str:
    """`text` with every run of MAX_WORD+ non-blank characters cut, and at most MAX_MESSAGE long."""
    import re

    def cut(match: re.Match[str]) -> str:
        word = match.group()
        return f"{word[:MAX_WORD]}...({len(word)} characters)"

    text = re.sub(rf"[^\s'\",;()\[\]]{{{MAX_WORD + 1},}}", cut, text)
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + "..."


def _check_finite(model: Any, source: Path) -> None:
    """Refuse weights that hold NaN or infinity: any embedding from them is NaN, and a parity of
    NaN against NaN must not pass as a verdict (`min cosine nan`, exit 0)."""
    import numpy as np
    from onnx import TensorProto, numpy_helper

    floats = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16}
    for tensor in _tensors(model.graph):
        if tensor.data_type not in floats:
            continue
        try:
            values = numpy_helper.to_array(tensor)
        except Exception as exc:  # a tensor whose data does not fit its shape
            raise SpeakerModelError(f"{source}: tensor {tensor.name!r} cannot be read ({exc})") from None
        if not np.isfinite(values).all():
            bad = int(np.size(values) - np.isfinite(values).sum())
            raise SpeakerModelError(
                f"{source}: tensor {tensor.name!r} holds {bad} NaN or infinite value(s); "
                "a model with non-finite weights is refused before any parity verdict"
            )


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
    _check_finite(model, source)
    return model


def ort_session(path: str | os.PathLike[str], threads: int | None = None) -> Any:
    """An ONNX Runtime CPU session of the checked model (made from bytes, never from a path)."""
    import onnxruntime

    model = load_model(path)
    # ONNX Runtime's own log writes to fd 2 past our escaping: a warning quoting a 1 MB initializer
    # name, in colour. Its errors still come back as exceptions, and those we bound.
    onnxruntime.set_default_logger_severity(3)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
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

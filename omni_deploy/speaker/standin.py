"""Build a stand-in campplus.onnx: real CAM++ structure, deterministic random weights.

The real weights ship only with the model checkpoints, which cannot be fetched here. The stand-in
is exported the way the real file was (TorchScript exporter, eval mode, BatchNorm folded into the
convs that precede it), so the loader meets the same graph shapes and opaque initializer names.
Every BatchNorm gets random affine parameters and running statistics, so folding mistakes show.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

STANDIN_NOTE = "stand-in CAM++ with random weights (not the released campplus.onnx)"


@dataclass(frozen=True)
class GraphSummary:
    nodes: int
    batchnorm_nodes: int
    avgpool_nodes: int
    initializers: int
    size_bytes: int


def build_reference(seed: int = 0):  # type: ignore[no-untyped-def]
    """The unfused torch CAM++ with the stand-in's weights (eval mode)."""
    import torch

    from omni_deploy.speaker.reference_model import CAMPPlus

    generator = torch.Generator().manual_seed(seed)
    model = CAMPPlus()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.Conv1d, torch.nn.Conv2d)):
                fan_in = module.weight[0].numel()
                module.weight.copy_(
                    torch.randn(module.weight.shape, generator=generator) * (2.0 / fan_in) ** 0.5
                )
                if module.bias is not None:
                    module.bias.copy_(torch.randn(module.bias.shape, generator=generator) * 0.1)
            elif isinstance(module, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                assert module.running_mean is not None and module.running_var is not None
                shape = module.running_mean.shape
                module.running_mean.copy_(torch.randn(shape, generator=generator) * 0.3)
                module.running_var.copy_(torch.rand(shape, generator=generator) * 1.5 + 0.5)
                if module.affine:
                    module.weight.copy_(torch.rand(shape, generator=generator) * 0.8 + 0.6)
                    module.bias.copy_(torch.randn(shape, generator=generator) * 0.2)
    return model.eval()


def export_standin(out: Path, seed: int = 0, opset: int = 13, replace: bool = True) -> GraphSummary:
    """Export the stand-in to `out` (complete or not at all; see export_module)."""
    return export_module(build_reference(seed), out, seed, opset, replace)


def export_module(model, out: Path, seed: int = 0, opset: int = 13, replace: bool = True) -> GraphSummary:  # type: ignore[no-untyped-def]
    """Export an eval-mode CAM++ module the way the released file was exported.

    Exported in memory, then written through omni_deploy.common.atomic_write: a fresh temporary name, then
    renamed over `out` (`replace`) or linked to it only if it does not exist; a planted
    `OUT.partial` symlink or a link at `out` never redirects the write."""
    import io

    import torch

    from omni_deploy.common.atomic_write import write_atomic

    example = torch.randn(1, 200, 80, generator=torch.Generator().manual_seed(seed + 1))
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (example,),
            buffer,  # type: ignore[arg-type]  # a file-like object is documented and works
            dynamo=False,
            input_names=["input"],
            output_names=["output"],
            dynamic_axes={"input": {0: "B", 1: "T"}, "output": {0: "B"}},
            opset_version=opset,
            do_constant_folding=True,
        )
    write_atomic(
        out,
        buffer.getvalue(),
        link="replace",
        mode=0o644,
        fsync=False,
        existing="replace" if replace else "refuse",
    )
    return summarize(out)


def summarize(path: Path) -> GraphSummary:
    import onnx

    model = onnx.load_model_from_string(path.read_bytes())  # our own export, just written
    ops = [node.op_type for node in model.graph.node]
    return GraphSummary(
        nodes=len(ops),
        batchnorm_nodes=ops.count("BatchNormalization"),
        avgpool_nodes=ops.count("AveragePool"),
        initializers=len(model.graph.initializer),
        size_bytes=path.stat().st_size,
    )

"""CAM++ speaker embedding in torch, loaded from campplus.onnx, for CUDA (and CPU).

Stands alone: imports nothing from the config side, so it runs on a GPU box with only torch,
onnx and numpy. Heavy imports happen inside the functions below, not at package import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omni_deploy.speaker.encoder import SpeakerEncoder

__all__ = ["load_encoder"]


def load_encoder(
    onnx_path: str,
    device: Any = "cuda",
    allow_tf32: bool = True,
    cuda_graphs: bool = True,
    cudnn_tf32: bool | None = None,
) -> SpeakerEncoder:
    """The CAM++ encoder for `onnx_path` on `device`, shared by every caller in the process."""
    from omni_deploy.speaker.encoder import get_encoder

    return get_encoder(
        onnx_path, device=device, allow_tf32=allow_tf32, cuda_graphs=cuda_graphs, cudnn_tf32=cudnn_tf32
    )

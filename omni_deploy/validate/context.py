"""Everything the checks look at, computed once per file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omni_deploy.config.chain import Resolved
from omni_deploy.config.nodes import Map, Node, Scalar, Seq, to_plain
from omni_deploy.config.platform import PlatformApplied
from omni_deploy.knowledge.pipelines import PipelineInfo


@dataclass(frozen=True)
class ModelShape:
    """What the Talker's KV cache costs per token, from the model's published config."""

    bytes_per_token: int
    source: str


@dataclass
class Options:
    platforms: tuple[str, ...] | None = None  # None: cuda plus every platform the file has a section for
    strict: bool = False
    target_version: str = "0.30.0"
    gpu_memory_gib: float | None = None
    pipeline: str | None = None
    model_shape: ModelShape | None = None


@dataclass
class Context:
    file: str
    resolved: Resolved
    options: Options
    pipeline: PipelineInfo
    applied: dict[str, PlatformApplied] = field(default_factory=dict)

    @classmethod
    def load(cls, name: str, options: Options) -> Context:
        """Resolve the file's base_config chain and tell its pipeline (raises ConfigError)."""
        from omni_deploy.config.chain import locate_top_file, resolve_file
        from omni_deploy.knowledge.pipelines import identify

        resolved = resolve_file(locate_top_file(name))
        return cls(name, resolved, options, identify(resolved.config, resolved.chain, options.pipeline))

    @property
    def code2wav_extra_path(self) -> str:
        """Where the Code2Wav options live, as a path for messages."""
        found = self.code2wav_connector()
        return f"connectors.{found[0]}.extra" if found else "connectors.<stage 2 input>.extra"

    @property
    def root(self) -> Map:
        return self.resolved.config

    def stages(self) -> list[Map]:
        node = self.root.get("stages")
        return [s for s in node.items if isinstance(s, Map)] if isinstance(node, Seq) else []

    def stage(self, stage_id: int) -> Map | None:
        found = None
        for stage in self.stages():
            if _is_int(stage.get("stage_id"), stage_id):
                found = stage
        return found

    def connectors(self) -> Map | None:
        node = self.root.get("connectors")
        return node if isinstance(node, Map) else None

    def platform_sections(self) -> Map | None:
        node = self.root.get("platforms")
        return node if isinstance(node, Map) else None

    def code2wav_connector(self) -> tuple[str, Map] | None:
        """For MiniCPM-o 4.5: the connector stage 2 receives from stage 1, whose extra Code2Wav reads."""
        known = self.pipeline.known
        if known is None or known.code2wav_stage is None:
            return None
        stage = self.stage(known.code2wav_stage)
        inputs = stage.get("input_connectors") if stage else None
        if not isinstance(inputs, Map):
            return None
        name_node = inputs.get(f"from_stage_{known.code2wav_stage - 1}")
        connectors = self.connectors()
        if not isinstance(name_node, Scalar) or connectors is None:
            return None
        connector = connectors.get(name_node.value)
        return (str(name_node.value), connector) if isinstance(connector, Map) else None

    def code2wav_extra(self) -> Map | None:
        found = self.code2wav_connector()
        if found is None:
            return None
        extra = found[1].get("extra")
        return extra if isinstance(extra, Map) else None


def _is_int(node: Node | None, value: int) -> bool:
    return isinstance(node, Scalar) and not isinstance(node.value, bool) and node.value == value


def value_of(node: Node | None) -> Any:
    return to_plain(node) if node is not None else None


def model_shape_from_config(path: Path) -> ModelShape:
    """Bytes per Talker token from a MiniCPM-o config.json (its `tts_config`)."""
    import json

    data = json.loads(path.read_text())
    tts = data.get("tts_config", data)
    layers = int(tts["num_hidden_layers"])
    heads = int(tts["num_attention_heads"])
    kv_heads = int(tts.get("num_key_value_heads") or heads)
    head_dim = int(tts.get("head_dim") or int(tts["hidden_size"]) // heads)
    dtype = str(tts.get("torch_dtype") or data.get("torch_dtype") or "bfloat16")
    width = 4 if "32" in dtype else 2
    return ModelShape(2 * layers * kv_heads * head_dim * width, f"{path} (tts_config)")

"""What the checks look at: the Deployment, the validation options, the platform views checked."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from omni_deploy.config.platform import PlatformApplied
from omni_deploy.deployment.model import Deployment
from omni_deploy.knowledge.target import TargetReads
from omni_deploy.knowledge.versions import RELEASED
from omni_deploy.validate.server_check.run import ServerRun


@dataclass(frozen=True)
class ModelShape:
    """What the Talker's KV cache costs per token, from the model's published config."""

    bytes_per_token: int
    source: str


@dataclass
class Options:
    platforms: tuple[str, ...] | None = None  # None: cuda plus every platform the file has a section for
    strict: bool = False
    target_version: str = RELEASED
    gpu_memory_gib: float | None = None
    pipeline: str | None = None
    model_shape: ModelShape | None = None
    gpus_per_node: int | None = None  # set: check placement on nodes of this many GPUs
    # A vllm-omni source tree (the folder holding vllm_omni/) read as the target's code, e.g. a
    # main checkout that is not installed.
    vllm_omni_source: Path | None = None
    ignore: frozenset[str] = frozenset()  # finding codes to leave out (--ignore, project settings)
    # The server check (omni_deploy/validate/server_check/): vllm-omni's own start-up config code run in a
    # child process. off for the library and the commands that only preflight; validate passes auto
    # (run when the serving environment's vllm-omni is the target) or on (not running is an error).
    server_check: str = "off"
    server_python: str | None = None  # the serving environment's interpreter (default: this one)
    server_timeout_s: float = 300.0
    server_memory_gib: float = 16.0
    model: str | None = None  # a local model folder, for pipelines that need its config.json


@dataclass
class Context:
    """What the checks look at: the loaded deploy file, the options, and the platform views checked."""

    deployment: Deployment
    options: Options
    applied: dict[str, PlatformApplied] = field(default_factory=dict)
    server: ServerRun | None = None  # the server check's run over this file and the others given with it

    @cached_property
    def target_reads(self) -> TargetReads:
        """What the target vllm-omni's code reads (the installed source, read now, when unreleased)."""
        from omni_deploy.knowledge.target import for_host, installed_reads

        if self.options.vllm_omni_source is not None:
            return installed_reads(self.options.target_version, self.options.vllm_omni_source)
        return for_host(self.options.target_version)

    @property
    def file(self) -> str:
        """The file as the user named it: where findings without a position are reported."""
        return self.deployment.name


def model_shape_from_config(path: Path) -> ModelShape:
    """Bytes per Talker token from a MiniCPM-o config.json (its `tts_config`); ValueError says
    what is wrong with a file that cannot give it (read through the guarded JSON reader)."""
    from omni_deploy.common.errors import ConfigError
    from omni_deploy.config.safe_read import read_json

    try:
        data = read_json(path)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    tts = data.get("tts_config", data) if isinstance(data, dict) else None
    if not isinstance(tts, dict):
        raise ValueError("expected a JSON object with the model's tts_config")

    def positive(key: str, fallback: int | None = None) -> int:
        value = tts.get(key) or fallback
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 2**20:
            raise ValueError(f"tts_config.{key} must be a positive integer, not {value!r}")
        return value

    layers = positive("num_hidden_layers")
    heads = positive("num_attention_heads")
    kv_heads = positive("num_key_value_heads", heads)
    hidden = tts.get("hidden_size")
    head_dim = positive(
        "head_dim", hidden // heads if isinstance(hidden, int) and not isinstance(hidden, bool) else None
    )
    dtype = str(tts.get("torch_dtype") or data.get("torch_dtype") or "bfloat16")
    width = 4 if "32" in dtype else 2
    return ModelShape(2 * layers * kv_heads * head_dim * width, f"{path} (tts_config)")

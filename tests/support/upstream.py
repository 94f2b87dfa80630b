"""The real vllm-omni 0.30.0 code as a test oracle, without importing vllm.

The wheel is downloaded once (pip download --no-deps) into a cache. From its
`vllm_omni/config/stage_config.py` we take, by AST, the pure merge and platform functions and the
dataclasses they use, and run them with the real omegaconf. The oracle is therefore upstream's
own code, not our reading of its rules.
"""

from __future__ import annotations

import ast
import dataclasses
import logging
import os
import subprocess
import sys
import types
import zipfile
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal, NamedTuple

VERSION = "0.30.0"
CACHE = Path(os.environ.get("OMNI_DEPLOY_TEST_CACHE", Path(__file__).resolve().parents[2] / ".cache"))

_WANTED = {
    "StageDeployConfig", "DuplexSessionRuntimeConfig", "DeployConfig", "PlatformOverrides",
    "_STAGE_RESERVED_KEYS", "_STAGE_DEPLOY_FIELDS", "_DEEP_MERGE_KEYS",
    "_get_recursively_merged_dict", "_deep_merge_stage", "_merge_stage_lists", "_merge_platforms",
    "_merge_connectors", "resolve_deploy_yaml", "load_deploy_config", "_parse_stage_deploy",
    "_extract_platform_overrides", "_apply_platform_overrides",
}  # fmt: skip


@cache
def wheel_root() -> Path:
    """The unpacked vllm-omni wheel (downloaded on first use; once for all test processes)."""
    target = CACHE / f"vllm_omni-{VERSION}"
    if (target / "vllm_omni" / "config" / "stage_config.py").is_file():
        return target
    return unpacked(VERSION, target)


def unpacked(version: str, target: Path) -> Path:
    """`target`: the vllm_omni/ tree of the `version` wheel, downloaded into the cache once and
    unpacked whole (under a lock, renamed into place), so concurrent workers never read a half tree.
    A tree left by an earlier layout (unpacked in place) is kept as it is."""
    from tests.support.cache_lock import locked, made_once

    with locked(CACHE, f"vllm_omni-{version}.whl"):
        wheels = sorted(CACHE.glob(f"vllm_omni-{version}-*.whl"))
        if not wheels:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(CACHE),
                 f"vllm-omni=={version}"],
                check=True,
            )  # fmt: skip
            wheels = sorted(CACHE.glob(f"vllm_omni-{version}-*.whl"))

    def unpack(into: Path) -> None:
        with zipfile.ZipFile(wheels[0]) as archive:
            archive.extractall(into, [m for m in archive.namelist() if m.startswith("vllm_omni/")])

    return made_once(target, unpack)


def deploy_dir() -> Path:
    return wheel_root() / "vllm_omni" / "deploy"


def deploy_files() -> list[Path]:
    return sorted(deploy_dir().glob("*.yaml"))


@cache
def oracle() -> SimpleNamespace:
    """Upstream's functions, executed from their own source."""
    config_dir = wheel_root() / "vllm_omni" / "config"
    # Dataclasses with string annotations look their module up in sys.modules.
    module_obj = types.ModuleType("upstream_stage_config")
    sys.modules[module_obj.__name__] = module_obj
    namespace: dict[str, Any] = module_obj.__dict__
    namespace.update({
        "Any": Any, "Literal": Literal, "NamedTuple": NamedTuple, "Path": Path,
        "dataclass": dataclasses.dataclass, "field": dataclasses.field,
        "fields": dataclasses.fields, "logger": logging.getLogger("upstream"),
    })  # fmt: skip
    exec(compile((config_dir / "yaml_util.py").read_text(), "yaml_util.py", "exec"), namespace)
    tree = ast.parse((config_dir / "stage_config.py").read_text())
    body = []
    for node in tree.body:
        name = getattr(node, "name", None)
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
        if name in _WANTED:
            body.append(node)
    found = {getattr(n, "name", None) or n.targets[0].id for n in body}  # type: ignore[attr-defined]
    missing = _WANTED - found
    assert not missing, f"upstream stage_config.py lacks {missing}"
    module = ast.Module(body=body, type_ignores=[])
    exec(compile(module, "stage_config.py", "exec"), namespace)
    return SimpleNamespace(**{k: namespace[k] for k in _WANTED})


def parsed(raw: dict[str, Any]) -> Any:
    """Upstream's DeployConfig for an already resolved dict (what load_deploy_config builds)."""
    up = oracle()
    # load_deploy_config takes a path; do its body on a dict instead, by the same functions.
    stages = [up._parse_stage_deploy(s) for s in raw.get("stages", [])]
    kwargs: dict[str, Any] = {
        "async_chunk": raw.get("async_chunk", True),
        "session_mode": raw.get("session_mode", "turn"),
        "model_runner": raw.get("model_runner", "v1"),
        "active_stream_window": int(raw.get("active_stream_window", 0) or 0),
        "duplex_session": up.DuplexSessionRuntimeConfig(**(raw.get("duplex_session") or {})),
        "connectors": raw.get("connectors"),
        "edges": raw.get("edges"),
        "stages": stages,
        "platforms": raw.get("platforms"),
        "pipeline": raw.get("pipeline"),
    }
    for name in ("trust_remote_code", "distributed_executor_backend", "dtype", "quantization",
                 "enable_prefix_caching", "enable_chunked_prefill", "data_parallel_size",
                 "pipeline_parallel_size", "custom_voice_dir"):  # fmt: skip
        if name in raw:
            kwargs[name] = raw[name]
    return up.DeployConfig(**kwargs)


def applied(path: Path, platform: str) -> dict[str, Any]:
    """Upstream's platform-applied DeployConfig for a file, as a plain dict without `platforms`."""
    up = oracle()
    deploy = up.load_deploy_config(path)
    deploy = up._apply_platform_overrides(deploy, platform)
    out = dataclasses.asdict(deploy)
    out.pop("platforms")
    return out


def reparsed(raw: dict[str, Any]) -> dict[str, Any]:
    out = dataclasses.asdict(parsed(raw))
    out.pop("platforms")
    return out

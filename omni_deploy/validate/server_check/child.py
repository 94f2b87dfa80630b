"""The server check's child: run an installed vllm-omni's own start-up config path on deploy files.

Run as a script by the serving environment's interpreter (`python child.py`), never imported by
omni-deploy's validate: it imports vllm_omni (and through it vllm and torch). It imports nothing
of omni-deploy, so any interpreter that has vllm-omni can run it.

Reads one JSON request on stdin:

    {"jobs": [{"id": 0, "file": "/abs/x.yaml", "platforms": ["cuda"], "pipeline": "minicpmo_4_5",
               "model": null}]}

and writes one JSON line per job on its stdout (flushed per job, so a run stopped by its time
limit still returns the jobs it finished), after a first line that says what ran:

    {"kind": "hello", "vllm_omni": "0.30.0", "vllm": "0.30.0", "path": "typed_config", "import_s": 8.1}
    {"kind": "job", "id": 0, "platform": "cuda", "steps": [...], "error": {...} | null,
     "swallowed": [{...}]}

Everything vllm and vllm-omni print goes to stderr: the protocol owns the original stdout.

What runs, per file and platform, is what `vllm serve MODEL --omni --deploy-config FILE` runs
before any engine starts (0.30.0: `entrypoints/cli/serve.py:1121` -> `config/resolver.py`
`resolve_omni_config` -> `config/config_factory.py:415` `VllmOmniConfig.from_pipeline_config`):
- `load`: `config/stage_config.py` `load_deploy_config` (base_config chain, merge, stage parse,
  `DuplexSessionRuntimeConfig(**duplex_session)`),
- `pipeline`: the file's `pipeline:` (else the one omni-deploy inferred) looked up in
  `config/pipeline_registry.py`, read as text, so only that pipeline's module is imported (the
  registry module itself imports every model family and, through vLLM's Qwen2-VL code,
  torchvision),
- `typed_config`: `VllmOmniConfig.from_pipeline_config` with the platform applied as a server on
  that platform applies it (older releases: `merge_pipeline_deploy`, their start-up merge),
- `stage_engines` (the typed path): what the stage runtime runs for each stage before it needs a GPU
  or the model (engine_steps.py): the replica layout, the engine arguments, the device-layout check
  and vLLM's scheduler config on the file's values,
- `transfer_config`: `engine/stage_init_utils.py` `load_omni_transfer_config_for_model`'s body;
  upstream catches every exception there, logs a warning and runs with no connector config, so a
  failure is reported as `swallowed`, not as `error`.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

PROTOCOL = 1


def _emit(out: Any, record: dict[str, Any]) -> None:
    out.write(json.dumps(record, default=str) + "\n")
    out.flush()


def _where(exc: BaseException, package_root: Path) -> str | None:
    """The innermost traceback frame inside vllm_omni (or vllm), as `vllm_omni/...py:LINE`."""
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        path = Path(frame.filename)
        for root in (package_root, package_root.parent / "vllm"):
            try:
                rel = path.resolve().relative_to(root.resolve().parent)
            except ValueError:
                continue
            found = f"{rel.as_posix()}:{frame.lineno}"
    return found


def _error(exc: BaseException, step: str, package_root: Path) -> dict[str, Any]:
    message = str(exc)
    if isinstance(exc, KeyError) and exc.args and isinstance(exc.args[0], str):
        message = exc.args[0]  # str(KeyError) adds quotes around the bare key
    return {
        "step": step,
        "type": type(exc).__name__,
        "message": message[:4000],
        "where": _where(exc, package_root),
    }


def registry_entries(root: Path) -> dict[str, tuple[str, str]]:
    """{pipeline name: (module, attribute)} from the release's pipeline_registry.py, read as text by
    omni-deploy's knowledge/facts.py (stdlib only; loaded by path: nothing of omni-deploy is imported
    as a package here)."""
    path = Path(__file__).resolve().parents[2] / "knowledge" / "facts.py"
    spec = importlib.util.spec_from_file_location("_omni_deploy_facts", path)
    assert spec is not None and spec.loader is not None
    facts = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = facts  # dataclasses look their module up while the class is built
    spec.loader.exec_module(facts)
    return {name: (module, attribute) for name, (module, attribute, _) in facts.registry(root.parent).items()}


def _hf_config(model: str | None) -> Any:
    """The model's config (a local folder's config.json), for pipelines that are resolvers."""
    if not model:
        return None
    try:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(model, trust_remote_code=False, local_files_only=True)
    except Exception:
        return None


class _Release:
    """The start-up config path of the installed release."""

    def __init__(self) -> None:
        import vllm_omni

        self.version = str(getattr(vllm_omni, "__version__", "unknown"))
        self.root = Path(vllm_omni.__file__).resolve().parent
        from vllm_omni.config import stage_config

        self.stage_config = stage_config
        self.registry = registry_entries(self.root)
        self.omni_config: Any = None
        # The typed config is what production start-up builds from 0.30.0 on (config/resolver.py,
        # called by entrypoints/cli/serve.py); 0.26.0/0.28.0 have the class but start through
        # the legacy stage configs (entrypoints/utils.py), so their path is merge_pipeline_deploy.
        if (self.root / "config" / "resolver.py").is_file():
            from vllm_omni.config import omni_config

            self.omni_config = omni_config
        self.path = "typed_config" if self.omni_config is not None else "merge_pipeline_deploy"

    def pipelines(self, name: str | None, model: str | None) -> list[Any]:
        """The pipeline the server would run: one, or, for a resolver (a function of the model's
        config, e.g. qwen3_omni_moe) without the model's config, every pipeline it can return."""
        if name is None:
            raise LookupError("no pipeline: the file names none and omni-deploy could not infer one")
        if name not in self.registry:
            raise KeyError(
                f"Pipeline {name!r} from deploy config is not registered to OMNI_PIPELINES. "
                f"Available: {sorted(self.registry)}"
            )
        module, attribute = self.registry[name]
        found = getattr(importlib.import_module(module), attribute)
        if not callable(found) or hasattr(found, "stages"):
            return [found]
        config = _hf_config(model)
        try:
            resolved = found(config)  # some resolvers take None (cosyvoice3: the default pipeline)
        except Exception:
            if config is not None:
                raise
            resolved = None  # qwen3_omni_moe reads hf_config.enable_audio_output: it needs one
        if resolved is not None:
            return [resolved]
        candidates = _returned(found) if config is None else []
        if not candidates:
            raise LookupError(f"pipeline {name!r} needs the model's config to resolve (--model)")
        return candidates

    def check(self, job: dict[str, Any], platform: str, out: dict[str, Any]) -> None:
        file, model = job["file"], job.get("model") or "omni-deploy/server-check"
        out["steps"].append("load")
        deploy = self.stage_config.load_deploy_config(file)
        out["steps"].append("pipeline")
        name = deploy.pipeline or job.get("pipeline")
        candidates = self.pipelines(name, job.get("model"))
        out["pipeline"] = getattr(candidates[0], "model_type", None)
        out["stages"] = {
            str(s.stage_id): getattr(getattr(s, "execution_type", None), "value", None)
            for s in candidates[0].stages
        }
        out["steps"].append("typed_config")
        raised: list[BaseException | None] = []
        for pipeline in candidates:
            try:
                self._typed(pipeline, deploy, file, model, platform, out)
                raised.append(None)
            except Exception as exc:
                raised.append(exc)
        verdicts = {None if e is None else (type(e).__name__, str(e)) for e in raised}
        if len(verdicts) > 1:
            # A resolver's pipelines disagree: only the model's config can tell which one runs.
            said = "; ".join(
                f"{getattr(p, 'model_type', '?')}: {'starts' if e is None else type(e).__name__}"
                for p, e in zip(candidates, raised, strict=True)
            )
            raise LookupError(f"pipeline {name!r} needs the model's config to resolve (--model): {said}")
        if raised[0] is not None:
            raise raised[0]
        if len(candidates) > 1:
            out["resolved_by"] = "every pipeline the resolver can return gives this verdict"

    def _typed(
        self, pipeline: Any, deploy: Any, file: str, model: str, platform: str, out: dict[str, Any]
    ) -> None:
        apply = functools.partial(self.stage_config._apply_platform_overrides, platform=platform)
        if self.omni_config is not None:
            original = self.omni_config._apply_platform_overrides
            self.omni_config._apply_platform_overrides = apply
            try:
                config = self.omni_config.VllmOmniConfig.from_pipeline_config(
                    pipeline,
                    user_deploy_config=deploy,
                    deploy_config_path=file,
                    cli_overrides={"model": model},
                )
            finally:
                self.omni_config._apply_platform_overrides = original
            if "stage_engines" not in out["steps"]:  # once, whichever pipeline the resolver tries
                out["steps"].append("stage_engines")
            from engine_steps import stage_engine_steps

            stage_engine_steps(config, model, platform)
        else:
            merge = self.stage_config.merge_pipeline_deploy
            original = getattr(self.stage_config, "_apply_platform_overrides", None)
            self.stage_config._apply_platform_overrides = apply
            try:
                merge(pipeline, deploy, {"model": model})
            finally:
                self.stage_config._apply_platform_overrides = original

    def transfer(self, job: dict[str, Any]) -> None:
        from vllm_omni.distributed.omni_connectors import load_omni_transfer_config

        load_omni_transfer_config(config_dict=self.stage_config.resolve_deploy_yaml(job["file"]))


def _run_job(release: _Release, job: dict[str, Any], platform: str, transfer: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "job", "id": job["id"], "platform": platform, "steps": [],
                           "error": None, "swallowed": []}  # fmt: skip
    started = time.monotonic()
    try:
        release.check(job, platform, out)
    except Exception as exc:  # every refusal becomes a finding in the parent
        out["error"] = _error(exc, out["steps"][-1] if out["steps"] else "load", release.root)
    # The connector set-up reads the merged file, not a platform's view: once per file is enough.
    if transfer and (out["error"] is None or out["error"]["step"] != "load"):
        try:
            release.transfer(job)
        except Exception as exc:
            out["swallowed"].append(_error(exc, "transfer_config", release.root))
    out["seconds"] = round(time.monotonic() - started, 3)
    return out


def _returned(resolver: Any) -> list[Any]:
    """The pipelines a resolver function returns by name (`return QWEN3_OMNI_PIPELINE`), read from
    its source and looked up in its module; empty where one return is anything else."""
    import ast
    import inspect
    import textwrap

    try:
        resolver = inspect.unwrap(resolver)  # under @pipeline_cfg_resolver (0.32.0rc1), the function itself
        tree = ast.parse(textwrap.dedent(inspect.getsource(resolver)))
    except (OSError, TypeError, SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Return):
            value = resolver.__globals__.get(node.value.id) if isinstance(node.value, ast.Name) else None
            if value is None or not hasattr(value, "stages"):
                return []
            found.append(value)
    return list({id(p): p for p in found}.values())


def main() -> int:
    # The protocol keeps the original stdout; everything else printed goes to stderr.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    request = json.loads(sys.stdin.read() or "{}")
    started = time.monotonic()
    try:
        release = _Release()
    except Exception as exc:
        _emit(out, {"kind": "hello", "protocol": PROTOCOL, "error": f"{type(exc).__name__}: {exc}"})
        return 3
    try:
        import vllm

        vllm_version = str(getattr(vllm, "__version__", "unknown"))
    except Exception:
        vllm_version = None
    _emit(out, {"kind": "hello", "protocol": PROTOCOL, "vllm_omni": release.version, "vllm": vllm_version,
                "path": release.path, "import_s": round(time.monotonic() - started, 3),
                "root": str(release.root)})  # fmt: skip
    for job in request.get("jobs", []):
        for index, platform in enumerate(job.get("platforms") or ["cuda"]):
            _emit(out, _run_job(release, job, platform, transfer=index == 0))
    # Whether the whole registry (every model family) was imported after all: it must not be.
    _emit(out, {"kind": "done", "registry_imported": "vllm_omni.config.pipeline_registry" in sys.modules})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

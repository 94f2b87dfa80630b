"""Regenerate `typed_config_owners.json`: the stage keys vllm-omni's typed config has an owner for.

    python -m tools.generate_owners           # in the vllm tier: write the installed release's entry
    python -m tools.generate_owners --check   # exit 1 when the committed entry differs

From 0.30.0 on, `vllm serve --omni` builds `VllmOmniConfig`, whose ownership check
(config/omni_config.py `_validate_stage_engine_override_ownership`) refuses any stage key that
no structured config owns. The owned sets are computed at import time from vLLM's own config
classes (LoadConfig, CacheConfig, SchedulerConfig, ParallelConfig, EngineArgs), so they can only be
read from a real vllm + vllm-omni pair: this module imports them (it runs in the vllm tier, never
in validate) and stores the sets per release. validate's static check (validate/check_owners.py)
reads the stored sets; a vllm-tier test regenerates the installed release's entry and fails when
it drifts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

DATA_FILE = Path(__file__).resolve().parents[1] / "omni_deploy" / "knowledge" / "typed_config_owners.json"


def _at(function: Any) -> str:
    import inspect

    import vllm_omni

    root = Path(vllm_omni.__file__).resolve().parent.parent
    source = Path(inspect.getsourcefile(function) or "").resolve()
    return f"{source.relative_to(root).as_posix()}:{inspect.getsourcelines(function)[1]}"


def _line_of(module: Any, pattern: str) -> str:
    """`vllm/<module path>:<line>` of the first line of the module that matches `pattern`."""
    import re

    import vllm

    path = Path(module.__file__)
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if re.search(pattern, line):
            return f"{path.relative_to(Path(vllm.__file__).parent.parent).as_posix()}:{number}"
    raise LookupError(f"{pattern!r} not in {path}")


def vllm_names() -> dict[str, Any]:
    """The names this vLLM accepts for a stage's kv_cache_dtype (CacheDType, which the typed config's
    cache config validates) and dtype ("Unknown dtype" otherwise): validate's E319 checks them per
    release, with this vLLM's lines."""
    import typing

    from vllm.config import cache, model

    return {
        "kv_cache_dtype": {
            "names": list(typing.get_args(cache.CacheDType)),
            "at": _line_of(cache, r"^CacheDType\b"),
        },
        "dtype": {
            "names": ["auto", *model._STR_DTYPE_TO_TORCH_DTYPE],
            "at": _line_of(model, r"Unknown dtype: \{dtype"),
        },
    }


def current() -> tuple[str, dict[str, Any]]:
    """(vllm-omni version, its entry) from the installed vllm-omni and vllm."""
    import vllm
    import vllm_omni
    from vllm_omni.config import omni_config

    owners = omni_config._STAGE_ENGINE_FIELDS_BY_EXECUTION_TYPE
    parallel = omni_config._PARALLEL_CONFIG_ENGINE_FIELDS_BY_EXECUTION_TYPE
    parallel_names = omni_config._PARALLEL_CONFIG_FIELDS_BY_EXECUTION_TYPE
    entry = {
        "generated_with": {"vllm": str(vllm.__version__), "vllm_omni": str(vllm_omni.__version__)},
        "check_at": _at(omni_config._validate_stage_engine_override_ownership),
        "values_at": _at(omni_config._stage_engine_overrides),
        # Deploy-stage fields copied into the checked mapping when set (not None).
        "stage_deploy_engine_fields": sorted(omni_config._STAGE_DEPLOY_ENGINE_FIELDS),
        # engine_extras keys left out of the checked mapping.
        "legacy_metadata_extras": sorted(omni_config._LEGACY_STAGE_METADATA_EXTRA_FIELDS),
        "owned": {kind.value: sorted(fields) for kind, fields in owners.items()},
        # Names accepted inside a stage's parallel_config mapping.
        "parallel_config": {
            kind.value: sorted(set(parallel[kind]) | set(parallel_names[kind])) for kind in parallel
        },
        "vllm_names": vllm_names(),
    }
    return str(vllm_omni.__version__), entry


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.generate_owners",
                                     description=__doc__.split("\n")[0])  # fmt: skip
    parser.add_argument("--check", action="store_true", help="compare with the committed entry instead")
    args = parser.parse_args(argv)
    committed = json.loads(DATA_FILE.read_text(encoding="utf-8")) if DATA_FILE.is_file() else {}
    version, entry = current()
    if args.check:
        if committed.get(version) != entry:
            print(f"{DATA_FILE} is out of date for vllm-omni {version}: run python -m "
                  "tools.generate_owners in the vllm tier", file=sys.stderr)  # fmt: skip
            return 1
        print(f"{DATA_FILE} is up to date for vllm-omni {version}")
        return 0
    committed[version] = entry
    DATA_FILE.write_text(render(committed), encoding="utf-8")
    print(f"wrote vllm-omni {version}'s entry to {DATA_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The shape of a stage entry as vllm-omni parses it (`StageDeployConfig`), for every release.

Only what the merge and platform code needs to mirror upstream lives here: which stage keys are
wrapper keys, which are typed engine fields, and hence which fall into `engine_extras`. The sets
differ by release (0.31 makes `model_runner` a wrapper key; 0.32 adds attention_backend,
moe_backend and linear_backend and drops auxiliary_text_encoder), so they are generated from each
release's own StageDeployConfig into stage_fields.json (python -m omni_deploy.knowledge.generate).
A file is normalised with the union of the releases' sets, so that no key moves between the stage
and its engine_extras depending on the target; what one release does with a key it does not know
is decided per release by the checks (validate/check_owners.py: `TargetReads.stage_reserved`).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

STAGE_FIELDS_FILE = Path(__file__).with_name("stage_fields.json")


@cache
def stage_fields_data() -> dict[str, Any]:
    """{release: {"at", "reserved", "fields", "owners_digest"?}} as generated from the wheels."""
    loaded: dict[str, Any] = json.loads(STAGE_FIELDS_FILE.read_text(encoding="utf-8"))["versions"]
    return loaded


def _union_reserved() -> frozenset[str]:
    return frozenset(key for entry in stage_fields_data().values() for key in entry["reserved"])


def _union_fields() -> tuple[str, ...]:
    """Every release's fields, newest release's declaration order first, then older ones' extra."""
    out: list[str] = []
    for entry in reversed(list(stage_fields_data().values())):
        out += [name for name in entry["fields"] if name not in out and name not in RESERVED_STAGE_KEYS]
    return tuple(out)


# Keys `_parse_stage_deploy` handles itself rather than as engine fields, in any release.
RESERVED_STAGE_KEYS = _union_reserved()

# StageDeployConfig's fields other than the wrapper ones, in any release.
STAGE_ENGINE_FIELDS: tuple[str, ...] = _union_fields()

# Top-level keys an overlay merges into its base's key by key (`_DEPLOY_DEEP_MERGE_KEYS`, 0.31 on:
# speech_cache); releases before have no such key, so merging it for every target changes nothing
# for them.
DEPLOY_DEEP_MERGE_KEYS = frozenset(
    key for entry in stage_fields_data().values() for key in entry.get("deploy_deep_merge", ())
)

# Attributes of a parsed stage: what a platform entry may set directly (`hasattr` upstream).
STAGE_ATTRIBUTES = frozenset(
    {
        "stage_id", "devices", "num_replicas", "env", "async_chunk", "model_runner", "output_connectors",
        "input_connectors", "default_sampling_params", "default_pooling_params", "engine_extras",
        *STAGE_ENGINE_FIELDS,
    }
)  # fmt: skip

PLATFORMS = ("cuda", "rocm", "npu", "xpu", "musa")

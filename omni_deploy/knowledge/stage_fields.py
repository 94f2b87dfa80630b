"""A release's stage schema and typed-config code, read by AST from its source (never imported).

`_parse_stage_deploy` (config/stage_config.py) keeps a stage's wrapper keys (`_STAGE_RESERVED_KEYS`:
stage_id, devices, ... and, from 0.31 on, model_runner) out of the engine fields, copies the other
`StageDeployConfig` fields, and puts every remaining key into `engine_extras`. Both sets change
between releases (0.32 adds attention_backend, moe_backend, linear_backend; drops
auxiliary_text_encoder), so they are read per release, not written down once.

`owners_digest` fingerprints the code that decides typed-config ownership (E315): the module-level
field sets of config/omni_config.py, its ownership check, and the stage schema. Two trees with the
same digest run the same ownership rules for the same vLLM, which is what lets an unknown tree borrow
a release's generated owners: the code is compared, never the version number.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path
from typing import Any

STAGE_CONFIG = "vllm_omni/config/stage_config.py"
OMNI_CONFIG = "vllm_omni/config/omni_config.py"
_OWNERSHIP_FUNCTIONS = frozenset({"_validate_stage_engine_override_ownership", "_stage_engine_overrides"})


def _module(root: Path, relative: str, text_of: Any = None) -> ast.Module | None:
    path = root / relative
    try:
        text = text_of(path) if text_of is not None else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if text is None:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None


def _names(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _target(node: ast.stmt) -> str | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def stage_schema(root: Path, text_of: Any = None) -> dict[str, Any] | None:
    """{"reserved": [...], "fields": [...], "at": file:line} of the tree's StageDeployConfig, or None
    where the release has none (0.20.0-0.24.0 parse stages otherwise)."""
    module = _module(root, STAGE_CONFIG, text_of)
    if module is None:
        return None
    reserved: list[str] | None = None
    deep: list[str] = []  # top-level keys an overlay deep-merges (0.31 on: speech_cache)
    declared: list[str] = []
    at = None
    for node in module.body:
        if isinstance(node, ast.ClassDef) and node.name == "StageDeployConfig":
            at = f"{STAGE_CONFIG}:{node.lineno}"
            declared = [
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            ]
        elif _target(node) == "_STAGE_RESERVED_KEYS":
            reserved = sorted(set(_names(node)))
        elif _target(node) == "_DEPLOY_DEEP_MERGE_KEYS":
            deep = sorted(set(_names(node)))
    if at is None or reserved is None:
        return None
    fields = [n for n in declared if n not in reserved]
    return {"at": at, "reserved": reserved, "fields": fields, **({"deploy_deep_merge": deep} if deep else {})}


def _ownership_nodes(module: ast.Module) -> list[ast.AST]:
    out: list[ast.AST] = []
    for node in module.body:
        name = _target(node)
        field_set = name is not None and name.startswith("_") and "FIELD" in name
        if field_set or (isinstance(node, ast.FunctionDef) and node.name in _OWNERSHIP_FUNCTIONS):
            out.append(node)
    return out


def owners_digest(root: Path, text_of: Any = None) -> str | None:
    """A fingerprint of the tree's typed-config ownership code (line numbers and comments ignored);
    None where the tree has no typed config."""
    omni = _module(root, OMNI_CONFIG, text_of)
    stage = _module(root, STAGE_CONFIG, text_of)
    if omni is None or stage is None:
        return None
    nodes = _ownership_nodes(omni)
    if not any(isinstance(n, ast.FunctionDef) for n in nodes):
        return None
    nodes += [
        n
        for n in stage.body
        if (isinstance(n, ast.ClassDef) and n.name == "StageDeployConfig")
        or _target(n) == "_STAGE_RESERVED_KEYS"
    ]
    digest = hashlib.sha256()
    for node in nodes:
        digest.update(ast.dump(node, annotate_fields=False).encode("utf-8"))
    return digest.hexdigest()[:16]


def vae_parallel_modes(root: Path, text_of: Any = None) -> dict[str, Any] | None:
    """The modes the typed config accepts for a diffusion stage's vae_parallel_mode, from its
    `self.vae_parallel_mode not in {...}` test (0.32 adds "batch"), with that test's line."""
    module = _module(root, OMNI_CONFIG, text_of)
    for node in ast.walk(module) if module is not None else []:
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.ops[0], ast.NotIn)
            and isinstance(node.left, ast.Attribute)
            and node.left.attr == "vae_parallel_mode"
            and isinstance(node.comparators[0], (ast.Set, ast.Tuple, ast.List))
        ):
            return {"names": sorted(_names(node.comparators[0])), "at": f"{OMNI_CONFIG}:{node.lineno}"}
    return None


def release_entry(root: Path, text_of: Any = None) -> dict[str, Any] | None:
    """What the generator stores per release: the stage schema, the ownership code's digest and the
    vae_parallel_mode names."""
    schema = stage_schema(root, text_of)
    if schema is None:
        return None
    digest = owners_digest(root, text_of)
    modes = vae_parallel_modes(root, text_of)
    return {
        **schema,
        **({"owners_digest": digest} if digest else {}),
        **({"vae_parallel_modes": modes} if modes else {}),
    }

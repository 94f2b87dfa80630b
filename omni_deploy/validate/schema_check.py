"""Type and bound checks from the generated JSON Schema, mapped back to file positions."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

from omni_deploy.common import codes
from omni_deploy.config.nodes import Map, Scalar, locate, path_string, to_plain
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at
from omni_deploy.validate.rules import emits

# Reported by the key and stage-id checks, with better messages.
_LEFT_TO_OTHER_CHECKS = {"additionalProperties", "propertyNames"}


def _not_finite(instance: Any) -> bool:
    return isinstance(instance, float) and not math.isfinite(instance)


@cache
def _validator(definition: str | None = None) -> Any:
    """The evaluator of the generated schema (or of one of its definitions); NaN and infinity are
    refused as numbers there, before bounds that cannot see them (validate/schema_eval.py)."""
    from omni_deploy.knowledge.schema import build_schema
    from omni_deploy.validate.schema_eval import Evaluator

    schema = build_schema()
    if definition is not None:
        schema = {**schema["$defs"][definition], "$defs": schema["$defs"]}
    return Evaluator(schema)


@emits(codes.E201)
def check_schema(ctx: Context) -> list[Finding]:
    """The JSON Schema of deploy files (from the knowledge table): types and bounds of every known key,
    platform sections included; the Code2Wav options typed where MiniCPM-o's Code2Wav reads them.

    E201:
        What it does: validates the merged file against the schema (`omni-deploy schema`) and reports
            each value of the wrong type or out of its bounds at its file:line:col; NaN and infinity
            fail every bound.
        Why: vllm-omni and vLLM take most values as they are: a negative KV budget or a string where a
            number belongs fails at start-up, or later, far from the line that set it.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                kv_cache_memory_bytes: -1
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                kv_cache_memory_bytes: 2147483648
    """
    from omni_deploy.validate.check_coercions import reading

    findings = []
    for path, error, in_code2wav in schema_errors(ctx, _validator):
        if reading(ctx, path, error, in_code2wav) is not None:
            continue  # read as another type than the schema's: check_coercions says how (I202, W203)
        node, key_origin = locate(ctx.deployment.config, path)
        origin = node.origin if node is not None else key_origin
        fix = _unquoting(error) if node is not None else None
        findings.append(
            at(
                origin,
                ctx.file,
                codes.E201,
                path_string(path, ctx.deployment.config),
                _message(error),
                None,
                fix,
            )
        )
    return findings


def schema_errors(ctx: Context, validator: Callable[..., Any]) -> Iterator[tuple[list[Any], Any, bool]]:
    """(path, error, in the Code2Wav extra) of every schema error this check owns: the Code2Wav
    options are typed only where MiniCPM-o's Code2Wav reads them (the named or inline connector that
    wins the 1->2 edge): other pipelines use some of the same names with other meanings."""
    yield from ((path, error, False) for path, error in _errors(ctx, validator(), []))
    found = ctx.deployment.code2wav_wiring()
    if found is not None:
        prefix = [*found[0], "extra"]
        yield from (
            (path, error, True) for path, error in _errors(ctx, validator("minicpmoCode2wavExtra"), prefix)
        )


def _errors(ctx: Context, validator: Any, prefix: list[Any]) -> Iterator[tuple[list[Any], Any]]:
    node, _ = locate(ctx.deployment.config, prefix)
    for error in validator.iter_errors(to_plain(node)):
        # Unknown keys and platform names are check_keys's; values under a platform section (reached
        # through additionalProperties) are checked here like any other.
        if error.validator in _LEFT_TO_OTHER_CHECKS or "propertyNames" in map(str, error.schema_path):
            continue
        path = prefix + list(error.absolute_path)
        if path and path[-1] == "stage_id":
            continue  # check_stage_ids says it better
        if _accepted_upstream(ctx, path, error) or _unread(ctx, path) or _replaced_everywhere(ctx, path):
            continue
        yield path, error


# Values the target's own code casts with int() before any bound (knowledge fact -> keys): a string
# of digits there is accepted, and the bound applies to the number it casts to.
_INT_CAST = {
    "num_replicas_int_cast": frozenset({"num_replicas"}),
    "code2wav_values_int_cast": frozenset({"codec_chunk_frames", "codec_left_context_frames"}),
}


def _int_cast(value: object) -> int | None:
    """int(value) as Python casts a YAML string ("25", " 25 "), None where int() raises."""
    if not isinstance(value, str) or len(value) > 32:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _within(number: int, schema: dict[str, Any]) -> bool:
    low, above = schema.get("minimum"), schema.get("exclusiveMinimum")
    high = schema.get("maximum")
    return (
        (low is None or number >= low)
        and (above is None or number > above)
        and (high is None or number <= high)
    )


def _accepted_upstream(ctx: Context, path: list[Any], error: Any) -> bool:
    """Whether the target's code accepts the value the schema refuses: max_model_len -1 (auto-fit,
    knowledge fact max_model_len_auto), a string its code casts with int() and whose number is in
    bounds (num_replicas_int_cast, code2wav_values_int_cast)."""
    key = path[-1] if path else None
    reads = ctx.target_reads
    if key == "max_model_len" and error.instance == -1 and reads.fact("max_model_len_auto"):
        return True
    if error.validator != "type" or not isinstance(key, str):
        return False
    number = _int_cast(error.instance)
    return (
        number is not None
        and any(key in keys and reads.fact(fact) for fact, keys in _INT_CAST.items())
        and _within(number, error.schema)
    )


def _replaced_everywhere(ctx: Context, path: list[Any]) -> bool:
    """A stage value that the platform section of every platform checked replaces: the server
    never reads it (the platform's own value is checked, under platforms)."""
    if len(path) != 3 or path[0] != "stages" or not isinstance(path[1], int) or not ctx.applied:
        return False
    written, _ = locate(ctx.deployment.config, path)
    stage, _ = locate(ctx.deployment.config, path[:2])
    sid = stage.get("stage_id") if isinstance(stage, Map) else None
    if written is None or not isinstance(sid, Scalar):
        return False
    for applied in ctx.applied.values():
        twin = next((s for s in applied.stages if to_plain(s.get("stage_id")) == sid.value), None)
        used = twin.get(path[2]) if twin is not None else None
        if used is None or used.origin == written.origin:
            return False
    return True


def _unread(ctx: Context, path: list[Any]) -> bool:
    """A key the target does not read outside a stage (W310 says so): its value is not checked
    either, so one key never gets both "ignored" and a type error."""
    from omni_deploy.knowledge.readers import NOT_READ, status

    if not path or not isinstance(path[-1], str):
        return False
    place = None
    if len(path) == 1:
        place = "top"
    elif len(path) == 2 and path[0] == "duplex_session":
        place = "duplex_session"
    elif path[-2:-1] == ["extra"] and (path[0] == "connectors" or "_connectors" in str(path[2:3])):
        found = ctx.deployment.code2wav_wiring()
        place = "code2wav" if found is not None and path[:-2] == found[0] else "connector_extra"
    return place is not None and status(place, path[-1], ctx.target_reads).kind == NOT_READ


_SCALAR_TYPES = {"boolean": (bool,), "integer": (int,), "number": (int, float)}


def _unquoting(error: Any) -> tuple[tuple[tuple[str, str], ...], str] | None:
    """A quoted "false" or "8" where a boolean or a number belongs has one right fix: the quotes
    go (vllm-omni reads the string "false" as true). Only where the bare text reads, as vllm-omni's
    loader reads it, as a value of the wanted type."""
    value = error.instance
    if error.validator != "type" or not isinstance(value, str) or not 0 < len(value) <= 32:
        return None
    wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
    kinds = tuple(t for w in wanted for t in _SCALAR_TYPES.get(w, ()))
    if not kinds or not all(c.isalnum() or c in "+-._" for c in value):
        return None
    import yaml

    from omni_deploy.config.yaml_loader import OmegaConfLikeLoader

    try:
        bare = yaml.load(value, Loader=OmegaConfLikeLoader)  # a SafeLoader
    except yaml.YAMLError:
        return None
    if isinstance(bare, bool) != (bool in kinds) or not isinstance(bare, kinds) or _not_finite(bare):
        return None
    kind = "boolean" if isinstance(bare, bool) else "number"
    return ((f'"{value}"', value), (f"'{value}'", value)), f"unquote {value!r} (a {kind}, not a string)"


def _message(error: Any) -> str:
    if error.validator == "type" and _not_finite(error.instance):
        return f"{error.instance!r} is not a finite number (NaN and infinity are refused)"
    if error.validator == "pattern":
        return f"{error.instance!r} is not {error.schema.get('x-expected', 'of the expected form')}"
    if error.validator == "type":
        expected = error.validator_value
        kinds = " or ".join(expected) if isinstance(expected, list) else expected
        return f"{error.instance!r} is not of type {kinds}"
    if error.validator in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        words = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
        return f"{error.instance!r} must be {words[error.validator]} {error.validator_value}"
    if error.validator == "enum":
        return f"{error.instance!r} is not one of {', '.join(map(repr, error.validator_value))}"
    return str(error.message)

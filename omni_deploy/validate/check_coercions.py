"""Values of another type than the schema's that the reader accepts: how each reader converts them.

The schema says what a value should be; whoever reads it decides what a value of another type
becomes (issue 42):
- a stage key the target's typed config owns is read by pydantic in lax mode (from 0.30.0 on,
  knowledge fact typed_config_at_startup): "32" is 32, "0.55" is 0.55, "false" is False;
- MiniCPM-o's Code2Wav casts its connector options with int() and bool() (knowledge facts
  code2wav_values_int_cast, code2wav_flag_bool_cast): "25" is 25, and bool("false") is True, so a
  quoted "false" turns a graph switch on;
- omni-deploy's plugin reads its own switches (token2wav_device_spk, token2wav_allow_tf32,
  token2wav_device_prepare) with integrations/speaker_rules.as_bool: 0/1 and the words
  true/false/yes/no/on/off.
A `${oc.env:NAME,default}` is what it resolves to: a string, read the same way.

The schema check leaves such a value to this check (`reading` is not None), which says what the
reader makes of it: as meant (I202), or the opposite of what it says (W203).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from omni_deploy.common import codes
from omni_deploy.config.nodes import Scalar, locate, path_string
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at
from omni_deploy.validate.rules import emits

_INT = re.compile(r"[+-]?\d{1,30}")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
# pydantic v2's lax bool from a string (pydantic-core's str_as_bool)
_PYDANTIC_TRUE = {"1", "on", "t", "true", "y", "yes"}
_PYDANTIC_FALSE = {"0", "off", "f", "false", "n", "no"}
# the words that say "false" to a reader, though bool() of any non-empty string is True
_SAYS_FALSE = _PYDANTIC_FALSE | {"none", "null", "disabled", "disable"}
_PLUGIN_SWITCHES = frozenset({"token2wav_device_spk", "token2wav_allow_tf32", "token2wav_device_prepare"})


@dataclass(frozen=True)
class Reading:
    """What the reader makes of a value of another type."""

    value: Any
    reader: str  # "the typed config (pydantic, lax mode)", "Code2Wav's bool()", ...
    inverted: bool  # the value says one thing and is read as its opposite


def _wanted(error: Any) -> list[str]:
    wanted = error.validator_value
    return [str(w) for w in (wanted if isinstance(wanted, list) else [wanted])]


def _lax(value: Any, wanted: list[str]) -> Any:
    """pydantic's lax conversion of a string to the first type it fits; None when none."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    text = value.strip()
    if "integer" in wanted and _INT.fullmatch(text):
        return int(text)
    if "number" in wanted and _FLOAT.fullmatch(text):
        return float(text)
    if "boolean" in wanted and text.lower() in _PYDANTIC_TRUE | _PYDANTIC_FALSE:
        return text.lower() in _PYDANTIC_TRUE
    return None


def _within(number: Any, schema: dict[str, Any]) -> bool:
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        return True
    low, above, high = schema.get("minimum"), schema.get("exclusiveMinimum"), schema.get("maximum")
    return (
        (low is None or number >= low)
        and (above is None or number > above)
        and (high is None or number <= high)
    )


def _stage_key(path: list[Any]) -> str | None:
    """The key of a stage value (a stage's own, or a platform section's stage entry's)."""
    if len(path) == 3 and path[0] == "stages" and isinstance(path[1], int) and isinstance(path[2], str):
        return path[2]
    if len(path) == 5 and path[0] == "platforms" and path[2] == "stages" and isinstance(path[4], str):
        return path[4]
    return None


def _owned(ctx: Context, key: str) -> bool:
    owners = ctx.target_reads.owners()
    if owners is None:
        return False
    return any(key in owned for owned in owners.get("owned", {}).values())


def reading(ctx: Context, path: list[Any], error: Any, in_code2wav: bool) -> Reading | None:
    """How the target (or the plugin) reads a value the schema refuses by its type; None where
    it refuses it too (E201 stands). `in_code2wav`: the value lies in the Code2Wav connector's extra."""
    if error.validator != "type" or not path or not isinstance(path[-1], str):
        return None
    key, value, wanted = path[-1], error.instance, _wanted(error)
    reads = ctx.target_reads
    if in_code2wav and key in _PLUGIN_SWITCHES:
        from omni_deploy.integrations.speaker_rules import as_bool

        switch = as_bool(value)
        return None if switch is None else Reading(switch, "omni-deploy's plugin (as_bool)", False)
    if in_code2wav and "boolean" in wanted and reads.fact("code2wav_flag_bool_cast"):
        if not isinstance(value, (str, int, float)):
            return None
        said = isinstance(value, str) and value.strip().lower() in _SAYS_FALSE
        return Reading(bool(value), f"Code2Wav's bool() ({reads.fact('code2wav_flag_bool_cast')})", said)
    if in_code2wav and "integer" in wanted and reads.fact("code2wav_values_int_cast"):
        number = int(value.strip()) if isinstance(value, str) and _INT.fullmatch(value.strip()) else None
        if number is None or not _within(number, error.schema):
            return None
        return Reading(number, f"Code2Wav's int() ({reads.fact('code2wav_values_int_cast')})", False)
    stage_key = _stage_key(path)
    if stage_key is None or not reads.fact("typed_config_at_startup") or not _owned(ctx, stage_key):
        return None
    number = _lax(value, wanted)
    if number is None or not _within(number, error.schema):
        return None
    return Reading(number, "the typed config (pydantic, lax mode)", False)


@emits(codes.I202, codes.W203)
def check_coercions(ctx: Context) -> list[Finding]:
    """Values of another type that the reader converts: said, with what they become.

    I202:
        What it does: reports a value of another type than the schema's that its reader converts to
            what it says: a quoted number or boolean on a stage key the target's typed config owns
            (pydantic in lax mode, 0.30.0 on), a string of digits in a Code2Wav option it casts with
            int(), 0 or 1 (or yes/no/on/off) in one of omni-deploy's plugin switches; with the fix
            that writes it as the type it is read as.
        Why: the server starts and means what the file says; the quotes only hide the type from
            every other reader (a diff, a schema, a later release).
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                max_num_seqs: "8"
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                max_num_seqs: 8
    W203:
        What it does: reports a quoted "false" (or "0", "no", "off") in a Code2Wav switch its code
            reads with bool() (enable_cfm_graph, enable_hift_graph, token2wav_float16, token2wav_trt,
            code2wav_bfloat16_attention_cache): bool() of a non-empty string is True, so it turns
            the switch on; `--fix` unquotes it.
        Why: the stage captures graphs (or builds TensorRT) the file says it should not, and nothing
            says so at start-up.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  enable_cfm_graph: "false"
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  enable_cfm_graph: false
    """
    from omni_deploy.config.nodes import shown, to_plain
    from omni_deploy.validate.schema_check import _unquoting, _validator, schema_errors

    out: list[Finding] = []
    for path, error, in_code2wav in schema_errors(ctx, _validator):
        read = reading(ctx, path, error, in_code2wav)
        if read is None:
            continue
        node, key_origin = locate(ctx.deployment.config, path)
        origin = node.origin if node is not None else key_origin
        written = shown(node) if isinstance(node, Scalar) else to_plain(node)
        where = path_string(path, ctx.deployment.config)
        fix = _unquoting(error) if node is not None else None
        if read.inverted:
            message = (
                f"{written!r} is read with {read.reader}: a non-empty string is True, so this turns "
                f"'{path[-1]}' on"
            )
            out.append(at(origin, ctx.file, codes.W203, where, message, "write false, unquoted", fix))
        else:
            # a value from the environment is never shown, nor what it is read as
            becomes = (
                "what it resolves to" if isinstance(node, Scalar) and node.expression else repr(read.value)
            )
            message = f"{written!r} is not of type {' or '.join(_wanted(error))}; {read.reader} reads it as {becomes}"
            out.append(at(origin, ctx.file, codes.I202, where, message, None, fix))
    return out

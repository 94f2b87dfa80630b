"""The schema evaluator that validate uses yields what jsonschema itself yields, on the real schema.

jsonschema stays the oracle here: the Draft 2020-12 validator with the one extension schema_check
makes (NaN and infinity are not numbers of any field).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, ValidationError, validators

from omni_deploy.common.errors import ConfigError
from omni_deploy.config.nodes import to_plain
from omni_deploy.deployment.model import Deployment
from omni_deploy.knowledge.schema import build_schema
from omni_deploy.validate.schema_eval import Evaluator, UnsupportedSchema, check_supported

DATA = Path(__file__).resolve().parents[1] / "data"
SCHEMA = build_schema()
CODE2WAV = {**SCHEMA["$defs"]["minicpmoCode2wavExtra"], "$defs": SCHEMA["$defs"]}


def _oracle(schema: dict[str, Any]) -> Any:
    plain_type = Draft202012Validator.VALIDATORS["type"]

    def finite_type(validator: Any, types: Any, instance: Any, schema: Any) -> Any:
        kinds = types if isinstance(types, list) else [types]
        if (
            isinstance(instance, float)
            and not math.isfinite(instance)
            and ("number" in kinds or "integer" in kinds)
        ):
            yield ValidationError(f"{instance!r} is not a finite number")
            return
        yield from plain_type(validator, types, instance, schema)

    return validators.extend(Draft202012Validator, {"type": finite_type})(schema)


def _same(schema: dict[str, Any], document: Any) -> None:
    def key(e: Any) -> tuple[Any, ...]:
        return (e.validator, tuple(e.absolute_path), repr(e.instance), tuple(map(str, e.schema_path)))

    # As a multiset: jsonschema walks additionalProperties in set order (findings are sorted by
    # place afterwards anyway).
    ours = sorted((key(e) for e in Evaluator(schema).iter_errors(document)), key=repr)
    theirs = sorted((key(e) for e in _oracle(schema).iter_errors(document)), key=repr)
    assert ours == theirs


def _documents() -> list[tuple[str, Any, Any]]:
    found = []
    for path in sorted(DATA.rglob("*.yaml")):
        try:
            deployment = Deployment.load(str(path))
        except (ConfigError, OSError):
            continue
        extra = deployment.code2wav_extra()
        found.append((path.relative_to(DATA).as_posix(), to_plain(deployment.config), to_plain(extra)))
    return found


DOCUMENTS = _documents()


def test_there_are_documents_with_errors_to_compare() -> None:
    with_errors = [name for name, doc, _ in DOCUMENTS if list(Evaluator(SCHEMA).iter_errors(doc))]
    assert len(DOCUMENTS) > 50 and len(with_errors) >= 5


@pytest.mark.parametrize(("name", "document", "extra"), DOCUMENTS, ids=[d[0] for d in DOCUMENTS])
def test_every_data_file_gets_the_errors_jsonschema_gives(name: str, document: Any, extra: Any) -> None:
    _same(SCHEMA, document)
    if extra is not None:
        _same(CODE2WAV, extra)


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "0", "0,1", "a,b", "v1", "v2", "fp16", "cuda", "true", "1.5"]),
)
_VALUES = st.recursive(
    _SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)  # fmt: skip


def _mapping(keys: list[str]) -> Any:
    return st.dictionaries(st.sampled_from(keys), _VALUES, max_size=6)


_STAGE = _mapping([*SCHEMA["$defs"]["stage"]["properties"], "unknown_key"])
_EXTRA = _mapping([*CODE2WAV["properties"], "unknown_key"])
_DOCUMENT = st.fixed_dictionaries(
    {},
    optional={
        "stages": st.lists(_STAGE, max_size=3) | _VALUES,
        "connectors": st.dictionaries(st.sampled_from(["shm", "x"]), st.fixed_dictionaries({}, optional={"extra": _EXTRA | _VALUES, "name": _VALUES})),
        "platforms": st.dictionaries(st.sampled_from(["cuda", "npu", "tpu"]), st.fixed_dictionaries({}, optional={"stages": st.lists(_STAGE, max_size=2)}) | _VALUES),
        "duplex_session": _mapping([*SCHEMA["properties"]["duplex_session"]["properties"], "nope"]) | _VALUES,
        "pipeline": _VALUES,
        "max_num_seqs": _VALUES,
    },
)  # fmt: skip


@settings(max_examples=200, deadline=None, derandomize=True)
@given(_DOCUMENT)
def test_generated_documents_get_the_errors_jsonschema_gives(document: Any) -> None:
    _same(SCHEMA, document)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(_EXTRA)
def test_generated_code2wav_extras_get_the_errors_jsonschema_gives(extra: Any) -> None:
    _same(CODE2WAV, extra)


def test_a_keyword_it_does_not_evaluate_is_refused() -> None:
    check_supported(SCHEMA)  # the generated schema uses only what it evaluates
    with pytest.raises(UnsupportedSchema, match="oneOf"):
        Evaluator({"properties": {"a": {"oneOf": [{"type": "integer"}]}}})

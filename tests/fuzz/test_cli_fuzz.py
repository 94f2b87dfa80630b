"""Fuzz tier: mutated hostile and real deploy files through every command that reads them.

Properties, whatever the input: exit 0, 1 or 2 (never 3, an internal error), no traceback, and
`-o json` output that parses as strict JSON. Seeds are the hostile classes of issue 14 and the
project's real deploy files; hypothesis mutates them (byte flips, splices, cuts, duplications)
and generates YAML of its own. Bounded: FUZZ_EXAMPLES examples per target (default 25; raise it
with OMNI_DEPLOY_FUZZ_EXAMPLES for a long local run), and each input's work is bounded by the
loader's budgets.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omni_deploy.cli.app import main
from tests.support.hostile import HOSTILE_YAML

ROOT = Path(__file__).resolve().parents[2]
FUZZ_EXAMPLES = int(os.environ.get("OMNI_DEPLOY_FUZZ_EXAMPLES", "25"))
SEEDS: list[bytes] = [content for content, _ in HOSTILE_YAML.values()] + [
    (ROOT / "deploy" / name).read_bytes() for name in ("minicpmo_4_5_turn.yaml", "turn-bench.yaml")
]
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,  # the same inputs on every run: a failure reproduces, CI stays steady
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _check(code: int, out: str, err: str, json_out: bool) -> None:
    assert code in (0, 1, 2), f"exit {code}\n{err[-2000:]}"
    assert "Traceback" not in out + err and "internal error" not in err, err[-2000:]
    if json_out and out.strip():
        json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in JSON output"))


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(("flip", "insert", "cut", "dup", "splice")))
        at = draw(st.integers(0, len(data)))
        if op == "flip" and data:
            data[min(at, len(data) - 1)] = draw(st.integers(0, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "cut":
            del data[at : at + draw(st.integers(1, 64))]
        elif op == "dup":
            piece = data[at : at + draw(st.integers(1, 64))]
            data[at:at] = piece * draw(st.integers(1, 8))
        else:
            other = draw(st.sampled_from(SEEDS))
            data[at:] = other[draw(st.integers(0, len(other))) :]
    return bytes(data)


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["${a}", "${oc.env:HOME}", "${oc.env:NOPE_X,1}", "${..x}", "\\${x}", "<<", "1e3"]),
)
_KEYS = st.one_of(
    st.sampled_from(["stages", "stage_id", "base_config", "connectors", "platforms", "extra", "a"]),
    st.text(max_size=8),
    st.integers(-3, 3),
)
_TREES = st.recursive(
    _SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_KEYS, children, max_size=4),
    max_leaves=25,
)


@st.composite
def generated(draw: st.DrawFn) -> bytes:
    tree = draw(st.dictionaries(_KEYS, _TREES, max_size=6))
    try:
        return yaml.safe_dump(tree, allow_unicode=True).encode("utf-8", "surrogatepass")
    except yaml.YAMLError:
        return b"a: 1\n"


DOCUMENTS = st.one_of(mutated(), generated())


def _write(content: bytes) -> tuple[tempfile.TemporaryDirectory[str], Path]:
    holder = tempfile.TemporaryDirectory(prefix="omni-fuzz-")
    path = Path(holder.name) / "deploy.yaml"
    path.write_bytes(content)
    return holder, path


@pytest.mark.parametrize(
    "args",
    [("validate",), ("validate", "-o", "json"), ("render",), ("render", "-o", "json", "--platform", "cuda"),
     ("explain",)],
    ids=["validate", "validate-json", "render", "render-json", "explain"],
)  # fmt: skip
def test_reading_commands_never_crash(args: tuple[str, ...]) -> None:
    @FUZZ
    @given(DOCUMENTS)
    def check(content: bytes) -> None:
        holder, path = _write(content)
        with holder:
            code, out, err = _run(*args, str(path))
            _check(code, out, err, "json" in args)

    check()


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_serve_dry_run_never_crashes(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    @FUZZ
    @given(DOCUMENTS)
    def check(content: bytes) -> None:
        holder, path = _write(content)
        with holder:
            run_dir = Path(holder.name) / "run"
            code, out, err = _run(
                "serve", str(path), "--platform", "cuda", "--dry-run", "--run-dir", str(run_dir), "-o", fmt
            )
            _check(code, out, err, fmt == "json")

    monkeypatch.setenv("XDG_CACHE_HOME", tempfile.gettempdir())
    check()


_FIELDS = ["completed", "failed", "duration", "max_concurrency", "total_audio_duration_s",
           "p50_audio_ttfp_ms", "p95_audio_ttfp_ms", "mean_audio_rtf", "request_throughput",
           "errors", "omni_deploy_round"]  # fmt: skip
_JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**30), max_value=10**30),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=6),
    ),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=10,
)


@st.composite
def result_files(draw: st.DrawFn) -> list[bytes]:
    files = []
    for _ in range(draw(st.integers(1, 3))):
        record: dict[str, Any] = {"completed": 4, "duration": 10.0, "max_concurrency": 4}
        record.update(draw(st.dictionaries(st.sampled_from(_FIELDS), _JSON_VALUES, max_size=6)))
        text = json.dumps(record).encode()  # json.dumps writes NaN and Infinity, as Python's bench might
        if draw(st.booleans()):
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.binary(max_size=6)) + text[at:]
        files.append(text)
    return files


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_bench_report_never_crashes(fmt: str) -> None:
    @FUZZ
    @given(result_files())
    def check(files: list[bytes]) -> None:
        with tempfile.TemporaryDirectory(prefix="omni-fuzz-") as name:
            for i, content in enumerate(files):
                (Path(name) / f"r{i}.json").write_bytes(content)
            code, out, err = _run("bench", "report", name, "-o", fmt)
            _check(code, out, err, fmt == "json")

    check()

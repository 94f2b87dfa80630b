"""Property-based: whatever the YAML, validate returns findings and never raises."""

from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omni_deploy.validate.context import Options
from omni_deploy.validate.runner import validate_file

ROOT = Path(__file__).resolve().parents[2]
KEYS = ["stages", "stage_id", "connectors", "extra", "platforms", "cuda", "npu", "devices", "max_num_seqs",
        "gpu_memory_utilization", "input_connectors", "from_stage_1", "to_stage_2", "base_config",
        "codec_chunk_frames", "hift_graph_capture_batch_sizes", "model_runner", "duplex_session", "engine_args",
        "runtime", "env", "kv_cache_memory_bytes", "pipeline", "minicpmo_4_5", "x"]  # fmt: skip
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**12), st.floats(allow_nan=True), st.sampled_from(KEYS),
    st.text(max_size=8),
)  # fmt: skip
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(KEYS) | st.integers(0, 3), children, max_size=5),
    ),
    max_leaves=30,
)

SETTINGS = settings(
    max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _check(text: str, tmp_path: Path) -> None:
    path = tmp_path / "doc.yaml"
    path.write_text(text)
    for options in (Options(), Options(platforms=("cuda", "npu", "xpu"), gpu_memory_gib=24, strict=True)):
        report = validate_file(str(path), options)
        assert isinstance(report.valid, bool)
        for finding in report.findings:
            assert finding.code[0] in "EWI" and finding.message


@SETTINGS
@given(documents)
def test_generated_documents_never_crash(tmp_path: Path, doc: object) -> None:
    _check(yaml.safe_dump(doc, allow_unicode=True), tmp_path)


BASE = (ROOT / "deploy" / "minicpmo_4_5_turn.yaml").read_text().splitlines()


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.integers(0, len(BASE) - 1), st.sampled_from(["delete", "dup", "indent", "garble", "value"])
        ),
        min_size=1,
        max_size=4,
    ),
    st.text(alphabet="abc:{}[]-!&*#'\" 0123456789", max_size=10),
)
def test_mutated_deploy_files_never_crash(tmp_path: Path, edits: list[tuple[int, str]], junk: str) -> None:
    lines = list(BASE)
    for index, action in edits:
        index = min(index, len(lines) - 1)
        if action == "delete" and lines:
            del lines[index]
        elif action == "dup":
            lines.insert(index, lines[index])
        elif action == "indent":
            lines[index] = "  " + lines[index]
        elif action == "garble":
            lines[index] = lines[index][: len(lines[index]) // 2] + junk
        elif action == "value" and ":" in lines[index]:
            lines[index] = lines[index].split(":", 1)[0] + ": " + junk
    _check("\n".join(lines) + "\n", tmp_path)

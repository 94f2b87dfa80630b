"""Hostile and careless input: every class of issue 14 is a finding at a place, never a crash."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from omni_deploy.common.errors import ConfigError
from omni_deploy.config.chain import MAX_CHAIN, resolve_file
from omni_deploy.config.safe_read import read_json
from tests.support.cli import run_cli
from tests.support.hostile import HOSTILE_YAML


@pytest.mark.parametrize("name", sorted(HOSTILE_YAML))
def test_each_hostile_class_is_a_finding(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    content, code = HOSTILE_YAML[name]
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(content)
    result = run_cli(capsys, "validate", "-o", "json", str(path))
    assert result.code == 1, result.err
    findings = json.loads(result.out)["files"][0]["findings"]
    assert code in [f["code"] for f in findings], findings
    located = next(f for f in findings if f["code"] == code)
    if code != "E107":
        assert located["line"] >= 1, located


def test_findings_point_at_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"a: 1\nbb: x\x01\n")
    with pytest.raises(ConfigError) as caught:
        resolve_file(path)
    assert caught.value.code == "E108"
    assert caught.value.location is not None
    assert (caught.value.location.line, caught.value.location.column) == (2, 6)


@pytest.mark.parametrize("kind", ["fifo", "directory", "device", "proc"])
def test_only_regular_files_are_read(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if kind == "fifo":
        target = tmp_path / "pipe.yaml"
        os.mkfifo(target)  # reading it would block forever
    elif kind == "directory":  # validate takes a directory as its *.yaml files: ask the loader
        target = tmp_path / "dir.yaml"
        target.mkdir()
        with pytest.raises(ConfigError) as caught:
            resolve_file(target)
        assert caught.value.code == "E107" and "directory" in caught.value.message
        return
    elif kind == "device":
        target = Path("/dev/zero")  # never ends
    else:
        target = Path("/proc/self/environ")
    result = run_cli(capsys, "validate", str(target))
    assert result.code == 1
    assert "E107" in result.out + result.err
    assert "Traceback" not in result.err


def test_proc_environ_as_base_is_refused_where_it_is_named(tmp_path: Path) -> None:
    doc = tmp_path / "leak.yaml"
    doc.write_text("base_config: /proc/self/environ\n")
    with pytest.raises(ConfigError) as caught:
        resolve_file(doc)
    assert caught.value.code == "E107"
    assert caught.value.location is not None and caught.value.location.line == 1
    assert "PATH=" not in str(caught.value)


def test_bad_bases_are_findings_at_the_base_config_line(tmp_path: Path) -> None:
    os.symlink(tmp_path / "loop2", tmp_path / "loop1")
    os.symlink(tmp_path / "loop1", tmp_path / "loop2")
    cases = {
        "loop.yaml": "base_config: loop1\n",
        "long.yaml": "base_config: " + "x" * 300 + ".yaml\n",
        "fifo.yaml": "base_config: pipe.yaml\n",
    }
    os.mkfifo(tmp_path / "pipe.yaml")
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ConfigError) as caught:
            resolve_file(tmp_path / name)
        assert caught.value.code == "E107", name
        assert caught.value.location is not None and caught.value.location.line == 1, name


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads unreadable directories")
def test_base_in_an_unreadable_directory(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "base.yaml").write_text("a: 1\n")
    locked.chmod(0)
    try:
        (tmp_path / "top.yaml").write_text("base_config: locked/base.yaml\n")
        with pytest.raises(ConfigError) as caught:
            resolve_file(tmp_path / "top.yaml")
        assert caught.value.code == "E107"
    finally:
        locked.chmod(stat.S_IRWXU)


def test_long_base_chains_stop_at_the_limit(tmp_path: Path) -> None:
    count = MAX_CHAIN + 5
    for i in range(count):
        text = f"base_config: c{i + 1}.yaml\n" if i < count - 1 else "a: 1\n"
        (tmp_path / f"c{i}.yaml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        resolve_file(tmp_path / "c0.yaml")
    assert caught.value.code == "E113"
    assert str(MAX_CHAIN) in caught.value.message


def test_a_chain_at_the_limit_still_loads(tmp_path: Path) -> None:
    for i in range(MAX_CHAIN):
        text = f"base_config: c{i + 1}.yaml\nk{i}: {i}\n" if i < MAX_CHAIN - 1 else "last: 1\n"
        (tmp_path / f"c{i}.yaml").write_text(text)
    assert "last" in resolve_file(tmp_path / "c0.yaml").config


def test_anchors_and_merges_within_budget_still_work(tmp_path: Path) -> None:
    doc = tmp_path / "ok.yaml"
    doc.write_text("base: &b {x: 1, y: 2}\nother: &o {y: 3, z: 4}\nm: {<<: [*b, *o], z: 5}\nlist: [*b, *b]\n")
    config = resolve_file(doc).config
    m = config.get("m")
    assert m is not None and {k: v.value for k, v in m.items()} == {"x": 1, "y": 2, "z": 5}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("[" * 200 + "]" * 200, "E109"),
        ('{"a": NaN}', "E101"),
        ('{"a": Infinity}', "E101"),
        ("1" * 5000, "E101"),
        ('{"a": ', "E101"),
    ],
)
def test_json_reads_are_guarded(text: str, code: str, tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        read_json(path)
    assert caught.value.code == code


@pytest.mark.parametrize(
    ("text", "word"),
    [("[]", "tts_config"), ('{"num_hidden_layers": 2, "num_attention_heads": 0, "hidden_size": 64}', "num_attention_heads"),
     ('{"num_hidden_layers": true, "num_attention_heads": 2, "hidden_size": 64}', "num_hidden_layers"),
     ("[" * 100000 + "]" * 100000, "nested"), ('{"a": NaN}', "NaN")],
    ids=["list", "zero-heads", "bool-layers", "deep", "nan"],
)  # fmt: skip
def test_a_bad_model_config_is_a_usage_message(
    text: str, word: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.json"
    config.write_text(text)
    result = run_cli(capsys, "validate", "--model-config", str(config))
    assert result.code == 2, result.err
    assert word in result.err and "internal error" not in result.err


def test_stdout_on_a_full_disk_is_a_message(tmp_path: Path) -> None:
    import subprocess
    import sys

    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    root = Path(__file__).resolve().parents[2]
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "omni_deploy", "render", "deploy/turn-bench.yaml"], stdout=full,
            stderr=subprocess.PIPE,
            text=True, cwd=root, timeout=60, env={**os.environ, "PYTHONPATH": str(root)},
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "cannot write output: No space left on device" in done.stderr
    assert "Traceback" not in done.stderr

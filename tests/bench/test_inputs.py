"""`bench inputs --from CHECKOUT`: the protocol's folders laid out deterministically with a manifest;
`bench run` refusing a folder without meta.lst or whose files differ from the manifest beside it.

The checkout is a stand-in (tests/data/bench/seed-tts-checkout: seed-tts-eval's layout, made-up rows).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from omni_deploy.bench.inputs import InputsError, check_folder, lay_out, plan_layout
from tests.serve.conftest import ROOT

CHECKOUT = ROOT / "tests" / "data" / "bench" / "seed-tts-checkout"
USABLE = 8  # rows of the stand-in's meta.lst that vllm-omni's loader takes (a comment and a bad line are not)


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "omni_deploy", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_lays_out_disjoint_folders_with_a_manifest(tmp_path: Path) -> None:
    done = _cli(tmp_path, "bench", "inputs", "--from", str(CHECKOUT), "--out", "inputs", "--evaluation", "5",
                "--warmup", "3")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (
        "next: omni-deploy bench run --base-url URL --dataset-path inputs/evaluation --warmup 3"
        in done.stdout
    )
    source = (CHECKOUT / "en" / "meta.lst").read_text().splitlines()
    rows = [line for line in source if line.count("|") >= 3]
    for subset, expected in (("evaluation", rows[:5]), ("warmup", rows[5:8])):
        folder = tmp_path / "inputs" / subset
        assert (folder / "en" / "meta.lst").read_text().splitlines() == expected  # verbatim, in order
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["ids"] == [line.split("|")[0] for line in expected]
        assert set(manifest["files"]) == {"en/meta.lst", *(f"en/{line.split('|')[2]}" for line in expected)}
        for name, digest in manifest["files"].items():
            assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest
        for line in expected:  # the copy is the checkout's file
            wav = line.split("|")[2]
            assert (folder / "en" / wav).read_bytes() == (CHECKOUT / "en" / wav).read_bytes()
        assert check_folder(folder) == f"{len(expected)} request(s), every file as manifest.json says"
    assert not [p for p in (tmp_path / "inputs").iterdir() if p.name.startswith(".")]  # no staging left


def test_the_same_checkout_gives_the_same_folders(tmp_path: Path) -> None:
    plan = plan_layout(CHECKOUT, "en", 2, 4)
    first, second = lay_out(plan, tmp_path / "a"), lay_out(plan_layout(CHECKOUT, "en", 2, 4), tmp_path / "b")
    for name in ("evaluation", "warmup"):
        assert _tree(first[name]) == _tree(second[name])


def test_refuses_before_writing_anything(tmp_path: Path) -> None:
    too_many = _cli(tmp_path, "bench", "inputs", "--from", str(CHECKOUT), "--out", "inputs")  # 64 + 32 asked
    assert too_many.returncode == 1 and f"has {USABLE} usable row(s)" in too_many.stderr
    assert "Traceback" not in too_many.stderr and not (tmp_path / "inputs").exists()
    broken = tmp_path / "broken"
    shutil.copytree(CHECKOUT, broken)
    (broken / "en" / "prompt-wavs" / "common_voice_en_1002.wav").unlink()
    missing = _cli(tmp_path, "bench", "inputs", "--from", str(broken), "--out", "inputs", "--evaluation", "3",
                   "--warmup", "0")  # fmt: skip
    assert missing.returncode == 1 and "common_voice_en_1002.wav" in missing.stderr
    assert not (tmp_path / "inputs").exists()
    not_seed = _cli(tmp_path, "bench", "inputs", "--from", str(tmp_path / "broken" / "en" / "prompt-wavs"))
    assert not_seed.returncode == 1 and "not a Seed-TTS evaluation checkout" in not_seed.stderr


def test_refuses_a_wav_path_outside_the_checkout(tmp_path: Path) -> None:
    evil = tmp_path / "evil" / "en"
    evil.mkdir(parents=True)
    (tmp_path / "secret.wav").write_bytes(b"RIFF")
    (evil / "meta.lst").write_text("a|ref|../../secret.wav|Say it.\n")
    with pytest.raises(InputsError, match="not a path inside"):
        plan_layout(evil.parent, "en", 0, 1)


def test_never_overwrites_a_folder(tmp_path: Path) -> None:
    (tmp_path / "inputs" / "warmup").mkdir(parents=True)
    (tmp_path / "inputs" / "warmup" / "mine.txt").write_text("keep")
    done = _cli(tmp_path, "bench", "inputs", "--from", str(CHECKOUT), "--evaluation", "4", "--warmup", "4")
    assert done.returncode == 1 and "never overwritten" in done.stderr
    assert sorted(p.name for p in (tmp_path / "inputs").iterdir()) == ["warmup"]  # evaluation/ not made
    assert (tmp_path / "inputs" / "warmup" / "mine.txt").read_text() == "keep"


def test_a_failed_write_leaves_no_folder_it_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """All or nothing, the OUT folders too: a write that fails halfway leaves the tree as it was."""
    import omni_deploy.bench.inputs as inputs

    plan = plan_layout(CHECKOUT, "en", warmup=4, evaluation=4)
    calls: list[Path] = []

    def fail_second(target: Path, *args: object) -> None:
        calls.append(target)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        target.mkdir()

    monkeypatch.setattr(inputs, "_write_subset", fail_second)
    with pytest.raises(InputsError, match="No space left"):
        lay_out(plan, tmp_path / "new" / "inputs")
    assert list(tmp_path.iterdir()) == []


def _bench_dry(tmp_path: Path, dataset: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _cli(tmp_path, "bench", "run", "--base-url", "http://127.0.0.1:9", "--dataset-path", str(dataset),
                "--concurrency", "1", "--dry-run", *extra)  # fmt: skip


def test_bench_run_refuses_a_folder_without_meta_lst(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = _bench_dry(tmp_path, tmp_path / "empty")
    assert done.returncode == 1 and "no en/meta.lst" in done.stderr and "bench inputs --from" in done.stderr
    assert done.stdout == ""  # no command printed for a sweep that cannot run


def test_bench_run_checks_the_manifest_beside_the_inputs(tmp_path: Path) -> None:
    folders = lay_out(plan_layout(CHECKOUT, "en", 2, 3), tmp_path / "inputs")
    ok = _bench_dry(tmp_path, folders["evaluation"], "--warmup", "2", "--warmup-path", str(folders["warmup"]))
    assert ok.returncode == 0, ok.stderr
    wav = next((folders["warmup"] / "en" / "prompt-wavs").iterdir())
    wav.write_bytes(wav.read_bytes() + b"\0")  # one changed byte in a warm-up WAV
    changed = _bench_dry(
        tmp_path, folders["evaluation"], "--warmup", "2", "--warmup-path", str(folders["warmup"])
    )
    assert changed.returncode == 1, changed.stdout
    assert (
        f"--warmup-path {folders['warmup']}: 1 file(s) differ from manifest.json: en/prompt-wavs/{wav.name}"
        in changed.stderr
    )
    (folders["evaluation"] / "en" / "meta.lst").write_text("x|ref|prompt-wavs/nowhere.wav|Say it.\n")
    gone = _bench_dry(tmp_path, folders["evaluation"])
    assert gone.returncode == 1 and "prompt-wavs/nowhere.wav" in gone.stderr

"""`bench inputs`' folders as vllm-omni's own Seed-TTS loader reads them (the one `vllm bench serve
--dataset-name seed-tts` uses): every request laid out, in order, each with its reference WAV."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omni_deploy.bench.inputs import lay_out, plan_layout

pytest.importorskip("vllm_omni")  # the vllm tier (.ci/run); the main tier has neither vllm nor vllm-omni
pytestmark = pytest.mark.vllm
ROOT = Path(__file__).resolve().parents[2]
CHECKOUT = ROOT / "tests" / "data" / "bench" / "seed-tts-checkout"


def test_vllm_omnis_loader_reads_the_laid_out_folders(tmp_path: Path) -> None:
    from vllm_omni.benchmarks.data_modules.seed_tts_dataset import SeedTTSDataset

    folders = lay_out(plan_layout(CHECKOUT, "en", 3, 5), tmp_path / "inputs")
    for name, folder in folders.items():
        dataset = SeedTTSDataset(
            dataset_path=str(folder), disable_shuffle=True
        )  # bench passes --disable-shuffle
        ids = json.loads((folder / "manifest.json").read_text())["ids"]
        assert [row.utterance_id for row in dataset.data] == ids, name
        for row in dataset.data:
            wav = (folder / "en" / row.prompt_wav_rel).resolve()
            assert wav.is_file() and wav.is_relative_to(folder.resolve())

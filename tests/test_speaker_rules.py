"""The speaker rules' one answer to "does this vllm-omni read token2wav_device_spk itself?", which
the plugin (on the imported module) and `explain --probe` (on the installed file) both take."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_deploy import host
from omni_deploy.speaker_rules import CODE2WAV_MODULE, reads_device_spk
from tests.support import upstream

READS = 'def _extra(self):\n    return self.extra.get("token2wav_device_spk", True)\n'
MENTIONS = '"""token2wav_device_spk: not read here."""\n# token2wav_device_spk is for the plugin\nx = 1\n'


def test_a_read_counts_and_a_mention_does_not() -> None:
    assert reads_device_spk(READS)
    assert not reads_device_spk(MENTIONS)
    assert not reads_device_spk("def broken(:\n")


@pytest.mark.upstream
def test_no_release_reads_it() -> None:
    module = upstream.wheel_root().joinpath(*CODE2WAV_MODULE.split(".")).with_suffix(".py")
    assert not reads_device_spk(module.read_text(encoding="utf-8"))


def test_the_probe_reads_the_installed_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "vllm_omni"
    module = tmp_path.joinpath(*CODE2WAV_MODULE.split(".")).with_suffix(".py")
    module.parent.mkdir(parents=True)
    monkeypatch.setattr(host, "installed_vllm_omni_dir", lambda: package)
    module.write_text(MENTIONS)
    assert host.vllm_omni_reads_device_spk() is False
    module.write_text(READS)
    assert host.vllm_omni_reads_device_spk() is True

"""The batched reference preparation's pure pieces, with torch alone (the vllm tier checks the whole
pass against vllm-omni's own `_prepare_prompt`: tests/integration/test_refprep.py)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from omni_deploy.speaker.refprep import plan  # noqa: E402
from omni_deploy.speaker.refprep.route import ENV_S3, choose_route  # noqa: E402
from omni_deploy.speaker.refprep.s3_tokens import layout, linear, split_for  # noqa: E402
from omni_deploy.speaker.refprep.staging import Upload  # noqa: E402
from omni_deploy.speaker.refprep.waves import gather_padded, reflect_gather  # noqa: E402


def test_layout_packs_each_voice_in_order_and_parks_the_spare_rows() -> None:
    rows, owners = layout([2, 3], slots=4, width=5, capacity=8)
    assert rows.tolist() == [0, 1, 5, 6, 7, 20, 20, 20]  # 20 = 4 * 5: the zero row
    assert owners.tolist() == [0, 0, 1, 1, 1, 4, 4, 4]  # 4: no voice


def test_split_for_fills_the_multiprocessors_only_where_rows_are_few() -> None:
    assert split_for(256, 1280, 1280, 132) == 5  # 20 tiles: cut in 5 (a divisor of 1280)
    assert split_for(2944, 1280, 1280, 132) == 1  # 230 tiles: enough
    assert split_for(256, 1280, 5120, 132) == 5
    assert split_for(128, 1280, 200, 132) == 1  # too shallow to cut


@pytest.mark.parametrize("split", [1, 4, 5])
def test_split_linear_is_the_linear_to_rounding(split: int) -> None:
    layer = torch.nn.Linear(1280, 96, bias=split != 4)
    x = torch.randn(37, 1280, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(linear(x, layer, split), layer(x), rtol=1e-5, atol=1e-5)


def test_reflect_gather_pads_each_item_as_torch_pads_one_signal() -> None:
    rng = np.random.default_rng(2)
    items = [torch.from_numpy(rng.standard_normal(n).astype(np.float32)) for n in (450, 300, 700)]
    flat = torch.cat(items)
    starts = torch.tensor([0, 450, 750])
    lengths = torch.tensor([450, 300, 700])
    got = reflect_gather(flat, starts, lengths, pad=200, width=1100)
    for row, item in zip(got, items, strict=True):
        want = torch.nn.functional.pad(item[None, None], (200, 200), mode="reflect")[0, 0]
        assert torch.equal(row[: want.numel()], want)


def test_gather_padded_zeroes_past_each_end() -> None:
    flat = torch.arange(1.0, 11.0)
    got = gather_padded(flat, torch.tensor([0, 6]), torch.tensor([3, 4]), width=5)
    assert got.tolist() == [[1, 2, 3, 0, 0], [7, 8, 9, 10, 0]]


def test_upload_sends_waves_and_named_integers() -> None:
    upload = Upload(torch.device("cpu"))
    upload.waves([torch.ones(3), torch.zeros(2)])
    upload.ints("a", [1, 2])
    upload.ints("b", np.array([7]))
    waves, ints = upload.send()
    assert waves.tolist() == [1, 1, 1, 0, 0]
    assert ints["a"].tolist() == [1, 2] and ints["b"].tolist() == [7]
    with pytest.raises(ValueError):
        upload.ints("a", [3])


@pytest.mark.parametrize(
    ("samples", "rate", "expected"),
    [(16000, 16000, None), (200, 16000, "too short"), (16000 * 31, 16000, "longer than 30 s"),
     (100, 0, "sample rate"), (500, 16000, "too short for CAM++")],
)  # fmt: skip
def test_voices_the_pass_leaves_to_vllm_omni(samples: int, rate: int, expected: str | None) -> None:
    why = plan.why_not_batched(samples, rate)
    assert (why is None) if expected is None else (why is not None and expected in why)


def test_the_plan_of_a_six_second_reference() -> None:
    voice = plan.VoicePlan.of(6 * 24000, 24000)  # what vllm-omni normalises request references to
    assert (voice.samples16, voice.mel_frames, voice.tokens, voice.flow_frames) == (96000, 600, 150, 300)
    assert voice.fbank_frames == 598


def test_the_route_follows_the_precision_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert choose_route(cpu, {}).s3 == "device"
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    assert choose_route(cuda, {}).s3 == "host"  # torch's default: TF32 convolutions
    assert choose_route(cuda, {ENV_S3: "device"}).s3 == "device"
    assert choose_route(cuda, {ENV_S3: "nonsense"}).s3 == "host"
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    assert choose_route(cuda, {}).s3 == "device"
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        assert choose_route(cuda, {}).s3 == choose_route(cpu, {}).s3 == "per-voice"
    finally:
        torch.set_float32_matmul_precision(previous)

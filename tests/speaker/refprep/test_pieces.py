"""The batched reference preparation's pure pieces, with torch alone (the vllm tier checks the whole
pass against vllm-omni's own `_prepare_prompt`: tests/integration/test_refprep.py)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from omni_deploy.speaker.refprep import plan  # noqa: E402
from omni_deploy.speaker.refprep.route import ENV_S3, choose_route, exact_routes  # noqa: E402
from omni_deploy.speaker.refprep.s3_tokens import (  # noqa: E402
    capacities,
    check_input,
    layout,
    linear,
    own_shape_ints,
    padded_capacity,
    split_for,
)
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


def test_the_route_follows_the_stages_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """token2wav_allow_tf32 true: every S3 operation at vllm-omni's own shapes (TF32 products round
    by shape); false: the host log-mel under cuDNN TF32 (the process's), the all-GPU front end
    without it; the CPU has no TF32: the all-device route under either policy."""
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    for cudnn_tf32 in (True, False):
        monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", cudnn_tf32)
        assert choose_route(cpu, True, {}).s3 == choose_route(cpu, False, {}).s3 == "device"
        assert choose_route(cuda, True, {}).s3 == "own-shapes"
        assert choose_route(cuda, False, {}).s3 == ("host" if cudnn_tf32 else "device")
        assert choose_route(cuda, True, {ENV_S3: "device"}).s3 == "device"
        assert choose_route(cuda, True, {ENV_S3: "nonsense"}).s3 == "own-shapes"
    assert exact_routes("cuda", True, True) == ("own-shapes", "per-voice")
    assert "device" not in exact_routes("cuda", False, True)


def test_packed_capacities_climb_a_short_ladder() -> None:
    assert [padded_capacity(n) for n in (1, 128, 129, 193, 4800, 8193, 9000)] == [
        128, 128, 192, 256, 6144, 16384, 16384,
    ]  # fmt: skip
    assert capacities(1, 200) == [128]  # 50 tokens
    assert capacities(32, 600) == [128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144]
    assert all(padded_capacity(n) >= n for n in range(1, 9000, 7))


def test_own_shape_integers_are_each_voices_count_rows_and_owner() -> None:
    assert own_shape_ints([2, 3]).tolist() == [2, 0, 1, 0, 0, 3, 0, 1, 2, 0, 0, 0]


def test_graph_inputs_are_checked_before_any_copy() -> None:
    cpu = torch.device("cpu")
    good = torch.zeros(2, 128, 10)
    check_input("mels", good, torch.float32, cpu, (2, 128, -1))
    for bad, expected in [
        (good.to(torch.bfloat16), "dtype"),
        (good[:1], "shape"),
        (good.transpose(1, 2).contiguous().transpose(1, 2), "contiguous"),
        (torch.zeros(2, 128, 10, device="meta"), "device"),
        ([good], "a tensor"),
    ]:
        with pytest.raises(ValueError, match=expected):
            check_input("mels", bad, torch.float32, cpu, (2, 128, -1))


def test_upload_names_its_host_buffers_device_and_dtype() -> None:
    """Under vLLM's loader: a bfloat16 default dtype and a device context for new tensors."""
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.bfloat16)
        with torch.device("meta"):
            upload = Upload(torch.device("cpu"))
            upload.waves([torch.ones(3, dtype=torch.float32, device="cpu")])
            upload.ints("n", [3])
            flat, ints = upload.send()
    finally:
        torch.set_default_dtype(previous)
    assert flat.dtype == torch.float32 and flat.device.type == "cpu" and flat.tolist() == [1.0, 1.0, 1.0]
    assert ints["n"].dtype == torch.int64 and ints["n"].device.type == "cpu"

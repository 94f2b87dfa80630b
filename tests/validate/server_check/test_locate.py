"""Where a refusal of vllm-omni's own code lands: by the key path its message names, never a bare
word that merely equals a deeper key (issue 31: E395 landed on hunyuan_image3_dit.yaml's
default_sampling_params.seed for a refusal of the stage's shared engine field `seed`)."""

from __future__ import annotations

from pathlib import Path

from omni_deploy.deployment.model import Deployment
from omni_deploy.validate.server_check.locate import places
from omni_deploy.validate.server_check.run import Refusal

_SEED = (
    "Diffusion stage 0 cannot consume shared engine field(s) 'seed'; use diffusion-owned fields or "
    "request sampling parameters instead."
)


def _load(tmp_path: Path, text: str) -> Deployment:
    path = tmp_path / "f.yaml"
    path.write_text(text)
    return Deployment.load(str(path))


def test_a_word_equal_to_a_deeper_key_is_not_the_place(tmp_path: Path) -> None:
    deployment = _load(
        tmp_path,
        "pipeline: wan2_2_ti2v\nstages:\n  - stage_id: 0\n    default_sampling_params:\n      seed: 42\n",
    )
    refusal = Refusal("cuda", "typed_config", "ValueError", _SEED, None)
    assert places(refusal, deployment.config) == []  # the whole file, not the sampling parameter


def test_the_stage_key_the_message_names_is_the_place(tmp_path: Path) -> None:
    deployment = _load(
        tmp_path,
        "pipeline: wan2_2_ti2v\nstages:\n  - stage_id: 0\n    seed: 3\n"
        "    default_sampling_params:\n      seed: 42\n",
    )
    refusal = Refusal("cuda", "typed_config", "ValueError", _SEED, None)
    assert [(p.origin.line, p.path) for p in places(refusal, deployment.config)] == [
        (4, "$.stages[?@.stage_id==0].seed")
    ]


def test_a_key_stated_with_its_value_is_the_one_holding_it(tmp_path: Path) -> None:
    deployment = _load(
        tmp_path,
        "pipeline: minicpmo_4_5\nstages:\n  - stage_id: 0\n    max_num_seqs: 4\n"
        "  - stage_id: 1\n    max_num_batched_tokens: 2\n    max_num_seqs: 8\n",
    )
    message = "Value error, max_num_batched_tokens (2) must be >= max_num_seqs (8)"
    found = places(Refusal("cuda", "typed_config", "ValidationError", message, None), deployment.config)
    assert sorted(p.origin.line for p in found) == [6, 7]  # not stage 0's max_num_seqs: 4


def test_a_key_under_a_stages_parallel_config_is_found(tmp_path: Path) -> None:
    deployment = _load(
        tmp_path,
        "pipeline: wan2_2_ti2v\nstages:\n  - stage_id: 0\n    parallel_config:\n      vae_parallel_mode: x\n",
    )
    message = "Value error, vae_parallel_mode must be one of {'tile'}, but got 'x'."
    found = places(Refusal("cuda", "typed_config", "ValidationError", message, None), deployment.config)
    assert [p.path for p in found] == ["$.stages[?@.stage_id==0].parallel_config.vae_parallel_mode"]


def test_a_none_in_the_connector_set_up_is_the_wired_null_extra(tmp_path: Path) -> None:
    deployment = _load(
        tmp_path,
        "pipeline: minicpmo_4_5\nstages:\n  - stage_id: 1\n    output_connectors:\n"
        "      to_stage_2: {name: SharedMemoryConnector, extra: null}\n",
    )
    refusal = Refusal("cuda", "transfer_config", "TypeError", "'NoneType' object is not iterable", None, True)
    found = places(refusal, deployment.config)
    assert [p.path for p in found] == ["$.stages[?@.stage_id==1].output_connectors.to_stage_2.extra"]

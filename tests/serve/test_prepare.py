"""serve's preparation: the host snapshot is passed in and never overwritten."""

from __future__ import annotations

import dataclasses

from omni_deploy.host import HostCaps
from omni_deploy.serve.prepare import serving_host


def test_dry_run_decides_for_the_serving_host_on_a_copy() -> None:
    probed = HostCaps(probed=True, torch=False, onnx=False, plugin_registered=False, vllm_omni="0.30.0")
    before = dataclasses.asdict(probed)
    intended = serving_host(probed, launching=False)
    assert (intended.probed, intended.torch, intended.onnx, intended.plugin_registered) == (
        False,
        True,
        True,
        True,
    )
    assert intended.vllm_omni == "0.30.0"
    assert dataclasses.asdict(probed) == before  # the snapshot preflight reads is untouched
    assert serving_host(probed, launching=True) is probed

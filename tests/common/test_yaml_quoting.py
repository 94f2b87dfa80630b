"""Strings a YAML 1.1 reader (kubectl's go-yaml) would take for another type are quoted."""

from __future__ import annotations

import pytest
import yaml

from omni_deploy.common.yaml_quoting import reinterpreted
from omni_deploy.k8s.output import to_yaml

REREAD = ["y", "Y", "n", "N", "yes", "Off", "~", "null", "", " x", "0o17", "017", "0b101", "0x1F",
          "1_000", "1:20", "1:20.5", "1e3", ".5", ".inf", ".NaN", "2001-12-14", "=", "<<"]  # fmt: skip
PLAIN = ["yy", "nope", "minicpmo", "gpu", "v1.2.3", "a:b", "0o8", "openbmb/MiniCPM-o-4_5"]


@pytest.mark.parametrize("value", REREAD)
def test_reinterpreted_strings_are_quoted(value: str) -> None:
    assert reinterpreted(value)
    assert f"k: {value}\n" not in to_yaml([{"k": value}])
    assert yaml.safe_load(to_yaml([{"k": value}])) == {"k": value}


@pytest.mark.parametrize("value", PLAIN)
def test_ordinary_strings_stay_plain(value: str) -> None:
    assert not reinterpreted(value)

"""The redactor: URL credentials and pieces of long secrets (omni_deploy/common/redact.py)."""

from __future__ import annotations


def test_url_passwords_are_hidden_everywhere_a_url_stands() -> None:
    from omni_deploy.common import redact

    argv = ["--env", "DSN=postgres://app:pw-123456@db/x", "--kv", "redis://:r-pass-1@c:6379/0"]
    assert redact.redact_argv(argv) == [
        "--env",
        "DSN=postgres://app:<redacted>@db/x",
        "--kv",
        "redis://:<redacted>@c:6379/0",
    ]
    assert redact.redact_env({"HTTPS_PROXY": "http://me:p-9876@proxy:3128"}) == {
        "HTTPS_PROXY": "http://me:<redacted>@proxy:3128"
    }
    assert set(redact.secret_values(argv, {})) == {"pw-123456", "r-pass-1"}
    assert (
        redact.scrub_shapes("at http://host:8080/x and ftp://u:pw@h")
        == "at http://host:8080/x and ftp://u:<redacted>@h"
    )


def test_a_shortened_secret_is_hidden_in_pieces() -> None:
    from omni_deploy.common import redact

    secret = "Sv7kQ2pX9mW4tR8zL3nB6cY1hJ5fD0gA-2026-prod-pw-Uo4eI7aS9dF2gH5jK8lZ"
    shortened = f"input_value='{secret[:24]}...{secret[-24:]}'"
    assert redact.scrub(shortened, [secret]) == "input_value='<redacted>...<redacted>'"
    assert (
        redact.env_shown(shortened, {secret: "${oc.env:PW}"}) == "input_value='${oc.env:PW}...${oc.env:PW}'"
    )
    assert redact.scrub("a short piece Sv7kQ2 stays", [secret]) == "a short piece Sv7kQ2 stays"

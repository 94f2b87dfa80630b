"""Secrets never reach the terminal or the run record."""

from __future__ import annotations

import re

_SECRET = re.compile(
    r"(^HF_TOKEN$|_TOKEN$|_KEY$|_SECRET$|_PASSWORD$|^HUGGING_FACE_HUB_TOKEN$)", re.IGNORECASE
)
REDACTED = "<redacted>"


def is_secret(name: str) -> bool:
    return bool(_SECRET.search(name))


def redact_env(env: dict[str, str | None]) -> dict[str, str | None]:
    return {k: (REDACTED if v is not None and is_secret(k) else v) for k, v in env.items()}

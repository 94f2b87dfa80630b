"""Secrets never reach the terminal or the run record; the server process still gets them.

Two kinds: environment variables whose name looks secret, and pass-through arguments to
`vllm serve` whose flag looks secret (`--api-key sk-X`, `--hf-token=X`). Shown and recorded
commands carry REDACTED in their place; the launched argv keeps the real values. The pattern is
broad on purpose: redacting a harmless value costs nothing, printing a key costs a rotation.
"""

from __future__ import annotations

import re

REDACTED = "<redacted>"
_SECRET_WORDS = re.compile(r"TOKEN|KEY|SECRET|PASS|AUTH|CREDENTIAL", re.IGNORECASE)


def is_secret(name: str) -> bool:
    """Whether an environment variable or a flag name looks like it carries a secret."""
    return bool(_SECRET_WORDS.search(name))


def redact_env(env: dict[str, str | None]) -> dict[str, str | None]:
    return {k: (REDACTED if v is not None and is_secret(k) else v) for k, v in env.items()}


def _secret_flag(arg: str) -> bool:
    return arg.startswith("--") and len(arg) > 2 and is_secret(arg[2:].split("=", 1)[0])


def redact_argv(argv: list[str]) -> list[str]:
    """`--api-key X` and `--api-key=X` (any flag naming a token, key, secret, password, auth or
    credential) with the value replaced; argparse reads the next word as the value unless it is
    another option, and so does this."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next and not arg.startswith("--"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        if _secret_flag(arg):
            if "=" in arg:
                out.append(arg.split("=", 1)[0] + "=" + REDACTED)
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return out


def secret_values(argv: list[str], env: dict[str, str | None]) -> list[str]:
    """The secret values themselves (argv and env), to scrub from server output."""
    values = [v for k, v in env.items() if v and is_secret(k)]
    for shown, real in zip(redact_argv(argv), argv, strict=True):
        if shown != real:
            values.append(real.split("=", 1)[1] if shown.endswith("=" + REDACTED) else real)
    return sorted({v for v in values if len(v) >= 4}, key=len, reverse=True)


def scrub(text: str, values: list[str]) -> str:
    for value in values:
        text = text.replace(value, REDACTED)
    return text

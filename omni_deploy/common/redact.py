"""Secrets never reach what omni-deploy prints or writes; the processes it starts still get them.

The rule (docs/serving.md, "What is redacted"):

- A value a deploy file takes from the environment (`${oc.env:NAME}`) is shown as that expression
  on every surface (messages, explain, diff, render, the run directory), never as its value,
  whatever NAME is (config/nodes.Scalar.expression carries it; the reporters print it).
- An environment variable whose name looks secret (TOKEN, KEY, SECRET, PASS, AUTH, CREDENTIAL,
  in any case) is a secret wherever its value came from: inherited, `serve --env`, `bench ab
  --a env=...`. So is the value of a pass-through flag whose name looks secret (`--api-key X`,
  `--hf-token=X`). Shown and recorded commands and environments carry REDACTED in their place.
- Those values are also scrubbed from free text, whatever their length: from the server's output
  (the terminal and server.log) and, as a last line of defence, from everything omni-deploy
  itself writes to stdout and stderr (`scrubbed_output`, installed by the CLI). A value of 8
  characters or more is replaced wherever it occurs; a shorter one where it stands as a word of
  its own (`abc` in `--api-key abc`, not in `abcdef`), so short values do not shred the text.
  Words that cannot be secrets (true, false, on, off, yes, no, none, null, numbers of one or two
  digits) are never scrubbed: `TOKENIZERS_PARALLELISM=false` must not hide every "false".

The name pattern is broad on purpose: redacting a harmless value costs nothing, printing a key
costs a rotation.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TextIO

REDACTED = "<redacted>"
_SECRET_WORDS = re.compile(r"TOKEN|KEY|SECRET|PASS|AUTH|CREDENTIAL", re.IGNORECASE)
_HARMLESS = re.compile(r"(?i)true|false|yes|no|on|off|none|null|[0-9]{1,2}")
_WORD = "A-Za-z0-9_-"
LONG = 8  # characters from which a value is scrubbed wherever it occurs


def is_secret(name: str) -> bool:
    """Whether an environment variable or a flag name looks like it carries a secret."""
    return bool(_SECRET_WORDS.search(name))


def counts_as_secret(value: str | None) -> bool:
    """A value worth hiding: not empty, and not a word every output is full of."""
    return bool(value) and not _HARMLESS.fullmatch(str(value).strip())


def redact_env(env: Mapping[str, str | None]) -> dict[str, str | None]:
    return {k: (REDACTED if v is not None and is_secret(k) else v) for k, v in env.items()}


def _secret_flag(arg: str) -> bool:
    return arg.startswith("--") and len(arg) > 2 and is_secret(arg[2:].split("=", 1)[0])


def _env_pair(value: str) -> str:
    """`K=V` of an --env option with V hidden when K looks secret."""
    key, sep, _ = value.partition("=")
    return f"{key}={REDACTED}" if sep and is_secret(key) else value


def redact_argv(argv: list[str]) -> list[str]:
    """`--api-key X` and `--api-key=X` (any flag naming a token, key, secret, password, auth or
    credential) with the value replaced; argparse reads the next word as the value unless it is
    another option, and so does this. `--env K=V` (omni-deploy serve's own) hides V when K looks
    secret, and so does bench ab's `env=K=V` override."""
    out: list[str] = []
    hide_next = False
    env_next = False
    for arg in argv:
        if hide_next and not arg.startswith("--"):
            out.append(REDACTED)
            hide_next = False
            continue
        if env_next:
            out.append(_env_pair(arg))
            env_next = False
            continue
        hide_next = False
        if arg == "--env":
            out.append(arg)
            env_next = True
        elif arg.startswith("--env="):
            out.append("--env=" + _env_pair(arg[len("--env=") :]))
        elif arg.startswith("env=") and "=" in arg[4:]:
            out.append("env=" + _env_pair(arg[4:]))
        elif _secret_flag(arg):
            if "=" in arg:
                out.append(arg.split("=", 1)[0] + "=" + REDACTED)
            else:
                out.append(arg)
                hide_next = True
        else:
            out.append(arg)
    return out


def secret_values(argv: list[str], env: Mapping[str, str | None]) -> list[str]:
    """The secret values themselves (argv and env), to scrub from free text."""
    values = [v for k, v in env.items() if v and is_secret(k)]
    for shown, real in zip(redact_argv(argv), argv, strict=True):
        if shown != real:  # shown is the real word's beginning (maybe empty) and REDACTED
            values.append(real[len(shown) - len(REDACTED) :])
    return ordered(values)


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of the environment's variables whose names look secret (inherited ones included)."""
    source = os.environ if environ is None else environ
    return ordered(v for k, v in source.items() if is_secret(k))


def ordered(values: Iterable[str | None]) -> list[str]:
    """Distinct secret values, longest first (so a value inside another is not replaced first)."""
    return sorted({v for v in values if v and counts_as_secret(v)}, key=len, reverse=True)


def _pattern(values: tuple[str, ...]) -> re.Pattern[str] | None:
    if not values:
        return None
    parts = [re.escape(v) if len(v) >= LONG else f"(?<![{_WORD}]){re.escape(v)}(?![{_WORD}])" for v in values]
    return re.compile("|".join(parts))


_PATTERNS: dict[tuple[str, ...], re.Pattern[str] | None] = {}


def scrub(text: str, values: Iterable[str]) -> str:
    """`text` with every secret value replaced by REDACTED (short values only as whole words)."""
    key = tuple(ordered(values))
    if not key or not text:
        return text
    pattern = _PATTERNS.get(key)
    if pattern is None:
        pattern = _PATTERNS[key] = _pattern(key)
        if len(_PATTERNS) > 64:
            _PATTERNS.clear()
    assert pattern is not None
    return pattern.sub(REDACTED, text)


def without_partial_secret(text: str, values: Iterable[str]) -> str:
    """`text` without a trailing beginning of a secret (where a line was cut inside one)."""
    for value in ordered(values):
        for size in range(len(value) - 1, 0, -1):
            if text.endswith(value[:size]):
                return text[:-size]
    return text


# --- values a deploy file took from the environment ---------------------------------------------


def env_shown(text: str, values: Mapping[str, str]) -> str:
    """Free text with each value a file took from the environment (`values`: value -> its
    `${oc.env:...}` expression, config.nodes.env_values) shown as the expression. Quoted forms
    are replaced always; the bare value only from 4 characters on (a bare "0" is everywhere)."""
    import json

    for value, expression in sorted(values.items(), key=lambda kv: -len(kv[0])):
        if not value:
            continue
        text = text.replace(json.dumps(value), json.dumps(expression)).replace(repr(value), repr(expression))
        if len(value) >= 4:
            text = text.replace(value, expression)
    return text


def env_shown_data(data: Any, values: Mapping[str, str]) -> Any:
    """JSON-like data with env_shown applied to every string (an exact value becomes its expression)."""
    if not values:
        return data
    if isinstance(data, str):
        return values.get(data) or env_shown(data, values)
    if isinstance(data, dict):
        return {k: env_shown_data(v, values) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [env_shown_data(v, values) for v in data]
    return data


# --- the last line of defence: everything omni-deploy writes to stdout and stderr ---------------

# --- secrets known by their shape ---------------------------------------------------------------

# Token formats of the services an operator of this tool holds keys for, and private-key blocks:
# hidden wherever they occur in what we print, whatever variable (if any) they came from. A file
# named by mistake (base_config: ~/.cache/huggingface/token) must not be echoed whole.
_W = r"(?<![A-Za-z0-9_\-])"  # a match starts only where a word does: each character is scanned once
_SHAPES = re.compile(
    rf"{_W}hf_[A-Za-z0-9]{{16,}}"
    rf"|{_W}gh[pousr]_[A-Za-z0-9]{{20,}}|{_W}github_pat_[A-Za-z0-9_]{{20,}}"
    rf"|{_W}glpat-[A-Za-z0-9_\-]{{16,}}"
    rf"|{_W}sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{{20,}}"
    rf"|{_W}(?:AKIA|ASIA)[0-9A-Z]{{16}}(?![0-9A-Za-z])"
    rf"|{_W}xox[abprs]-[A-Za-z0-9\-]{{10,}}"
    rf"|{_W}eyJ[A-Za-z0-9_\-]{{10,}}\.[A-Za-z0-9_\-]{{10,}}\.[A-Za-z0-9_\-]{{10,}}"  # a JWT
    r"|-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----"
)
# `key: value` / `"key": "value"` / `key=value`; the key (a whole word, scanned once) is a secret's
# name when its last segment is one: `hf_token`, `"auth"`, `PASSWORD`, not `max_tokens`.
_PAIR = re.compile(
    r"""(?P<q>["']?)(?<![A-Za-z0-9_.\-])(?P<key>[A-Za-z0-9_.\-]+)(?P=q)"""
    r"""(?P<sep>[ \t]*[:=][ \t]*)(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s,}\]]+)"""
)
_SECRET_KEY = re.compile(
    r"(?i)(?:^|[_.\-])(?:token|secret|password|passwd|pass|auth|api[_\-]?key|apikey|credentials?"
    r"|private[_\-]?key|access[_\-]?key)$"
)


def scrub_shapes(text: str) -> str:
    """`text` with every token-shaped value (hf_..., ghp_..., AKIA..., a private key) hidden."""
    if not text:
        return text
    return _SHAPES.sub(REDACTED, text)


def redact_line(line: str) -> str:
    """A line of a file for a code frame: token shapes hidden, and the value of every pair whose
    key names a secret (`token: x`, `"auth": "..."`, `PASSWORD=x`)."""

    def hide(match: re.Match[str]) -> str:
        value = match.group("value")
        if not _SECRET_KEY.search(match.group("key")[-40:]):
            return match.group(0)
        if value.startswith("${") or not counts_as_secret(value.strip("\"'")):
            return match.group(0)  # an ${oc.env:...} expression is shown as itself
        return match.group("q") + match.group("key") + match.group("q") + match.group("sep") + REDACTED

    return _PAIR.sub(hide, scrub_shapes(line))


_registered: list[str] = []


def register(values: Iterable[str]) -> None:
    """More secret values for `scrubbed_output` to hide (serve's --env and pass-through values)."""
    _registered.extend(v for v in values if counts_as_secret(v))


def current_secrets() -> list[str]:
    return ordered([*environment_secrets(), *_registered])


class _ScrubbingBinary(io.RawIOBase):
    def __init__(self, inner: Any) -> None:
        super().__init__()
        self._inner = inner

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        raw = bytes(data)
        text = raw.decode("utf-8", "surrogateescape")
        self._inner.write(scrub_shapes(scrub(text, current_secrets())).encode("utf-8", "surrogateescape"))
        return len(raw)

    def flush(self) -> None:
        self._inner.flush()

    def fileno(self) -> int:
        return int(self._inner.fileno())

    def isatty(self) -> bool:
        return bool(self._inner.isatty())


class _ScrubbingText(io.TextIOBase):
    """A text stream that scrubs secrets from everything written through it, then passes it on."""

    def __init__(self, inner: TextIO) -> None:
        super().__init__()
        self._inner = inner

    def write(self, text: Any) -> int:
        if not isinstance(text, str):
            return int(self._inner.write(text))  # bytes: the wrapped stream says TypeError, as it should
        self._inner.write(scrub_shapes(scrub(text, current_secrets())))
        return len(text)

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        self._inner.flush()

    def fileno(self) -> int:
        return self._inner.fileno()

    def isatty(self) -> bool:
        return self._inner.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._inner, "encoding", "utf-8") or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self._inner, "errors", None)

    @property
    def buffer(self) -> Any:
        inner = getattr(self._inner, "buffer", None)
        return _ScrubbingBinary(inner) if inner is not None else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextlib.contextmanager
def scrubbed_output() -> Iterator[None]:
    """stdout and stderr scrub secrets for the duration (the CLI runs every command inside)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _ScrubbingText(saved[0]), _ScrubbingText(saved[1])
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        sys.stdout, sys.stderr = saved
        _registered.clear()

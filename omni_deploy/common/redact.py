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

- A password in a URL (`http://user:secret@host`, a DSN such as `postgres://u:p@db/x`, a proxy
  variable) is a secret wherever the URL stands: in an --env value, a pass-through flag, an
  inherited variable, free text. The URL is shown with `<redacted>` in the password's place.
- Long secrets are also hidden in pieces: a message that shortens a value (pydantic's
  `first24...last24`) or a line cut inside one must not show most of it. Any piece of a known
  secret of 16 characters or more that runs 12 characters or longer is replaced (`_pieces`).

The name pattern is broad on purpose: redacting a harmless value costs nothing, printing a key
costs a rotation.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
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


# scheme://user:PASSWORD@ (the password runs to the last `@` before a blank, as a URL parser
# reads an unescaped one); the user name is kept, the password never.
_URL_CREDENTIALS = re.compile(
    r"(?P<head>(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*:)(?P<password>[^\s@]+)(?=@)"
)


def url_passwords(text: str | None) -> list[str]:
    """The passwords of the URLs in `text` (`http://u:PASSWORD@h`, `postgres://u:PASSWORD@db`)."""
    if not text or "://" not in text:
        return []
    return [m.group("password") for m in _URL_CREDENTIALS.finditer(text)]


def hide_url_credentials(text: str) -> str:
    """`text` with every URL's password replaced by REDACTED."""
    if "://" not in text:
        return text
    return _URL_CREDENTIALS.sub(lambda m: m.group("head") + REDACTED, text)


def redact_urls(argv: Iterable[str]) -> list[str]:
    """Words of a command of ours (vllm bench serve's: `--tokenizer` is no secret) with each URL's
    password hidden."""
    return [hide_url_credentials(word) for word in argv]


def redact_env(env: Mapping[str, str | None]) -> dict[str, str | None]:
    return {
        k: (REDACTED if is_secret(k) else hide_url_credentials(v)) if v is not None else v
        for k, v in env.items()
    }


def _secret_flag(arg: str) -> bool:
    return arg.startswith("--") and len(arg) > 2 and is_secret(arg[2:].split("=", 1)[0])


def _env_pair(value: str) -> str:
    """`K=V` of an --env option with V hidden when K looks secret."""
    key, sep, _ = value.partition("=")
    return f"{key}={REDACTED}" if sep and is_secret(key) else hide_url_credentials(value)


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
            out.append(hide_url_credentials(arg))
    return out


def secret_values(argv: list[str], env: Mapping[str, str | None]) -> list[str]:
    """The secret values themselves (argv and env), to scrub from free text."""
    values = [v for k, v in env.items() if v and is_secret(k)]
    values += [p for v in env.values() for p in url_passwords(v)]
    for shown, real in zip(redact_argv(argv), argv, strict=True):
        values += url_passwords(real)
        if shown != real and shown.endswith(REDACTED):  # the real word's beginning, then REDACTED
            values.append(real[len(shown) - len(REDACTED) :])
    return ordered(values)


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of the environment's variables whose names look secret (inherited ones included)."""
    source = os.environ if environ is None else environ
    found = [v for k, v in source.items() if is_secret(k)]
    return ordered([*found, *(p for v in source.values() for p in url_passwords(v))])


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
    return _pieces(pattern.sub(REDACTED, text), key, lambda _value: REDACTED)


PIECE = 12  # characters of a long secret that are a piece worth hiding
_PIECED = 16  # secrets this long are also hidden in pieces
_WINDOW = PIECE // 2  # windows every _WINDOW characters: any piece of PIECE characters holds one
_MAX_WINDOWS = 512  # per secret (a 3 KB key is still found by its first and last pieces)


def _windows(value: str) -> list[int]:
    starts = list(range(0, len(value) - _WINDOW + 1, _WINDOW))
    if len(starts) > _MAX_WINDOWS:
        half = _MAX_WINDOWS // 2
        starts = starts[:half] + starts[-half:]
    return starts


def _spans(text: str, value: str) -> Iterator[tuple[int, int]]:
    """Where runs of PIECE or more characters of `value` stand in `text`: each of the value's
    windows found (str.find), then grown both ways along the value."""
    for j in _windows(value):
        window = value[j : j + _WINDOW]
        i = text.find(window)
        while i != -1:
            a, b, ja, jb = i, i + _WINDOW, j, j + _WINDOW
            while a > 0 and ja > 0 and text[a - 1] == value[ja - 1]:
                a, ja = a - 1, ja - 1
            while b < len(text) and jb < len(value) and text[b] == value[jb]:
                b, jb = b + 1, jb + 1
            if b - a >= PIECE:
                yield a, b
            i = text.find(window, max(b, i + 1) if b - a >= PIECE else i + 1)


def _pieces(text: str, values: Iterable[str], replacement: Callable[[str], str]) -> str:
    """`text` with every run of PIECE or more characters that is a piece of a long value (its
    beginning, its end, its middle: a shortened `first24...last24`, a line cut inside it) replaced
    by `replacement(value)`; overlapping runs are replaced once."""
    spans = sorted((a, b, v) for v in values if len(v) >= _PIECED for a, b in _spans(text, v))
    if not spans:
        return text
    out, at = [], 0
    for a, b, value in spans:
        if a < at:  # inside (or overlapping) a run already replaced
            at = max(at, b)
            continue
        out += [text[at:a], replacement(value)]
        at = b
    out.append(text[at:])
    return "".join(out)


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
    # A shortened value (pydantic's first24...last24 in a server-check message) shows pieces.
    return _pieces(text, [v for v in values if v], lambda value: values[value])


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
    return hide_url_credentials(_SHAPES.sub(REDACTED, text))


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

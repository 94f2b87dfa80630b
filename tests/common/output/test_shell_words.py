"""Command lines we print: a control character in a word is escaped, the word pastes back whole."""

from __future__ import annotations

import subprocess

from omni_deploy.common.output.escape import shell_join, shell_word


def test_plain_words_are_shlex_quoted() -> None:
    assert shell_join(["vllm", "serve", "a b"]) == "vllm serve 'a b'"


def test_a_newline_never_starts_a_line_and_bash_reads_the_word_back() -> None:
    word = "A=x\nforged: 'it'\\"
    shown = shell_word(word)
    assert "\n" not in shown
    echoed = subprocess.run(["bash", "-c", f"printf %s {shown}"], capture_output=True, check=True)
    assert echoed.stdout.decode() == word

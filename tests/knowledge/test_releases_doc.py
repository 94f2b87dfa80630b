"""docs/releases.md and the README's release spans are generated from the knowledge; stale, they fail."""

from __future__ import annotations

from pathlib import Path

from omni_deploy.knowledge import releases_doc
from omni_deploy.knowledge.versions import RELEASES

ROOT = Path(__file__).resolve().parents[2]


def test_releases_page_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "releases.md").read_text()
    assert committed == releases_doc.releases_markdown(), "run: python -m omni_deploy.knowledge.generate"


def test_readme_spans_are_up_to_date() -> None:
    for name in ("README.md", "docs/validating.md"):
        text = (ROOT / name).read_text()
        assert text == releases_doc.rewrite(text), f"{name}: run python -m omni_deploy.knowledge.generate"
    assert "<!-- releases:range -->" in (ROOT / "README.md").read_text()


def test_every_release_is_a_row_and_unknown_owners_say_so() -> None:
    page = releases_doc.releases_markdown()
    for version in RELEASES:
        assert f"\n| {version} | " in page, version
    assert "| 0.32.0rc1 | pre-release |" in page and "| 0.30.0 | final |" in page
    assert "| 0.28.0 | final |" in page and "no typed config at start-up" in page


def test_every_typed_config_release_has_its_owners() -> None:
    """A release added without its vllm tier's owners is not supported yet: E315 would be unknown."""
    from omni_deploy.knowledge.generate import missing_owners

    assert missing_owners() == [], "run python -m tools.generate_owners in each release's vllm tier"

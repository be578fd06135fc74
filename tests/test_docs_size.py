"""The docs a newcomer reads first stay readable in their time: docs/design.md in fifteen minutes (at most 3,000
words: architecture, vocabulary, stable interface; everything argued at length lives in the docs it links),
the README in five (at most 150 lines)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_design_md_is_at_most_3000_words() -> None:
    words = len((ROOT / "docs" / "design.md").read_text(encoding="utf-8").split())
    assert words <= 3000, f"docs/design.md has {words} words: move what is argued at length to the doc it links"


def test_readme_is_at_most_150_lines() -> None:
    lines = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= 150, f"README.md has {lines} lines: link docs/ instead of restating them"

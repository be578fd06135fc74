"""docs/reference/layout.md names every module under eval_assets/ and no module that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = ROOT / "docs" / "reference" / "layout.md"


def _tree() -> str:
    text = LAYOUT.read_text(encoding="utf-8")
    return text.split("```\n", 2)[1]  # the tree is the first fenced block


def test_every_module_is_named_in_the_layout_tree() -> None:
    tree = _tree()
    modules = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "eval_assets").rglob("*.py")
        if "project_template" not in p.parts and "__pycache__" not in p.parts
    )
    unnamed = [m for m in modules if not re.search(rf"(?<![\w.]){re.escape(Path(m).name)}\b", tree)]
    assert unnamed == [], "add these to docs/reference/layout.md"


def test_every_module_the_tree_names_exists() -> None:
    named = set(re.findall(r"(?<![\w/])(\w+\.py)\b", _tree()))
    shipped = {p.name for p in (ROOT / "eval_assets").rglob("*.py")}
    assert named - shipped == set(), "docs/reference/layout.md names modules that do not exist"

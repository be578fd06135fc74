"""docs/reference/cli.md is the argparse tree and its exit-code table, generated: it never drifts from them."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from eval_assets import exit_codes
from eval_assets.cli import EXITS, parser, reference
from eval_assets.cli.reference import reference_markdown, undeclared

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "cli.md"


def _tree(
    p: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    out = []
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                out += [((*path, name), child), *_tree(child, (*path, name))]
    return out


def _sections(text: str) -> dict[str, str]:
    return {part.split("\n", 1)[0]: part for part in text.split("\n## ")[1:]}


def test_the_checked_in_reference_is_what_the_parser_generates() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == reference_markdown(), (
        "docs/reference/cli.md differs from the parser: run `bash scripts/cli_reference`"
    )


def test_every_command_has_its_section_with_every_visible_option_and_its_exit_codes() -> None:
    """Each command and sub-command of the parser has a section naming each option it shows in --help
    (hidden spellings stay hidden); a leaf's section ends with its `EXITS` row plus the internal-error
    and usage codes, or says that it declares none."""
    sections = _sections(reference_markdown())
    tree = _tree(parser())
    assert len([p for p, _ in tree]) >= 30  # 19 top-level commands and their sub-commands
    for path, p in tree:
        section = sections[f"evaltrack {' '.join(path)}"]
        for action in p._actions:
            for option in action.option_strings:
                if option in ("-h", "--help"):
                    continue
                shown = f"`{option}`" in section or f"`{option} " in section
                assert shown is (action.help != argparse.SUPPRESS), (path, option)
        leaf = not any(isinstance(a, argparse._SubParsersAction) for a in p._actions)
        name = " ".join(path)
        if leaf and name in EXITS:
            assert f"Exit codes: {EXITS[name]}; {exit_codes.INTERNAL_ERROR} internal error; " in section
            assert f"{exit_codes.USAGE} usage" in section
        elif leaf:
            assert "Exit codes: not declared in `EXITS`" in section, name
            assert name in undeclared()
    assert set(EXITS) <= {" ".join(p) for p, _ in tree}  # no row for a command that does not exist


def test_a_command_added_to_the_parser_appears_in_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference walks the live tree: a new sub-command with an option and an `EXITS` row is rendered."""
    built = parser

    def with_extra() -> argparse.ArgumentParser:
        p = built()
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        extra = sub.add_parser("probe", help="a command only this test adds")
        extra.add_argument("--depth", help="how deep")
        return p

    monkeypatch.setattr(reference, "parser", with_extra)
    monkeypatch.setitem(EXITS, "probe", "0 probed; 1 refused")
    section = _sections(reference.reference_markdown())["evaltrack probe"]
    assert "a command only this test adds" in section and "`--depth DEPTH` | how deep" in section
    assert "Exit codes: 0 probed; 1 refused; 4 internal error; 64 usage" in section

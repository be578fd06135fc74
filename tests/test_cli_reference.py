"""docs/reference/cli.md is the argparse tree and its exit-code table, generated: it never drifts from them."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from eval_assets import exit_codes
from eval_assets.cli import parser, reference
from eval_assets.cli.arguments import CommandParser, command, exits_text
from eval_assets.cli.reference import declared_exits, exit_codes_markdown, leaves, reference_markdown

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "cli.md"
EXIT_CODES = REFERENCE.with_name("exit-codes.md")


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


def test_the_checked_in_exit_codes_are_what_the_commands_declare() -> None:
    assert EXIT_CODES.read_text(encoding="utf-8") == exit_codes_markdown(), (
        "docs/reference/exit-codes.md differs from the code: run `bash scripts/cli_reference`"
    )


def test_the_exit_code_reference_lists_every_code_and_every_leaf_command_s_codes() -> None:
    text = exit_codes_markdown()
    for code in exit_codes.MEANING:
        assert f"\n| {code} | " in text
    for name, p in leaves():
        assert f"| `evaltrack {name}` | {exits_text(declared_exits(name, p))} |" in text


def test_every_command_has_its_section_with_every_visible_option_and_its_exit_codes() -> None:
    """Each command and sub-command of the parser has a section naming each option it shows in --help;
    a leaf's section ends with the exit codes it declares plus the internal-error and usage codes."""
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
        if leaf:
            exits = declared_exits(" ".join(path), p)
            assert section.rstrip().endswith(f"Exit codes: {exits_text(exits).replace('|', chr(92) + '|')}")
            assert f"{exit_codes.INTERNAL_ERROR} " in section and f"{exit_codes.USAGE} " in section


def test_a_command_added_to_the_parser_appears_in_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference walks the live tree: a new sub-command with an option and its exit codes is rendered,
    in cli.md and in exit-codes.md."""
    built = parser

    def with_extra() -> argparse.ArgumentParser:
        p = built()
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        extra = command(
            sub,
            "probe",
            help="a command only this test adds",
            run=lambda _args: exit_codes.OK,
            exits={exit_codes.OK: "probed", exit_codes.REFUSED: "refused"},
        )
        extra.add_argument("--depth", help="how deep")
        return p

    monkeypatch.setattr(reference, "parser", with_extra)
    section = _sections(reference.reference_markdown())["evaltrack probe"]
    assert "a command only this test adds" in section and "`--depth DEPTH` | how deep" in section
    assert "Exit codes: 0 probed; 1 refused; 4 internal error; 64 usage" in section
    assert "| `evaltrack probe` | 0 probed; 1 refused; 4 internal error; 64 usage |" in exit_codes_markdown()


def test_a_leaf_command_without_declared_exit_codes_cannot_be_rendered() -> None:
    """A leaf added to the tree without `arguments.command` has no exit codes: the reference refuses it."""
    p = parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    sub.add_parser("bare", help="made without its exit codes")
    bare = dict(leaves(p))["bare"]
    with pytest.raises(ValueError, match="evaltrack bare declares no exit codes"):
        declared_exits("bare", bare)


def test_an_exit_code_outside_the_table_is_refused_when_the_command_is_made() -> None:
    sub = CommandParser(prog="probe").add_subparsers()
    with pytest.raises(ValueError, match=r"exit codes \[7\] are not in eval_assets.exit_codes"):
        command(sub, "odd", help="", run=lambda _args: exit_codes.OK, exits={7: "seven"})

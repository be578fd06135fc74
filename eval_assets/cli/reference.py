"""docs/reference/cli.md, rendered from the argparse tree (`parser()`) and the exit-code table (`EXITS`).

`scripts/cli_reference` writes it; tests/test_cli_reference.py fails when the checked-in file differs.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from eval_assets import exit_codes
from eval_assets.cli import EXITS, parser

_WIDTH = 100  # usage lines are wrapped at a fixed width, never the terminal's, so the file is stable


def _commands(
    p: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str]]:
    """Every command and sub-command, depth first in the order the parser declares them, with its help."""
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, child in action.choices.items():
                yield (*path, name), child, helps.get(name, "")
                yield from _commands(child, (*path, name))


def _is_leaf(p: argparse.ArgumentParser) -> bool:
    return not any(isinstance(a, argparse._SubParsersAction) for a in p._actions)


def _usage(p: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(prog=p.prog, width=_WIDTH)  # every parser here uses the default class
    formatter.add_usage(p.usage, p._actions, p._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _argument_rows(p: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in p._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        value = str(action.metavar or action.dest.upper())
        if action.nargs in ("+", "*"):
            value += " ..."
        if action.option_strings:
            name = ", ".join(
                f"`{s}`" if action.nargs == 0 else f"`{s} {value}`" for s in action.option_strings
            )
        else:
            name = f"`{value}`"
        notes = []
        if action.option_strings and action.required:
            notes.append("required")
        elif not action.option_strings and action.nargs == "?":
            notes.append("optional")
        if action.choices is not None:
            notes.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
        if action.default not in (None, False, argparse.SUPPRESS) and action.nargs != 0:
            notes.append(f"default `{action.default}`")
        if isinstance(action, argparse._AppendAction):
            notes.append("repeatable")
        rows.append(f"| {name} | {_cell(action.help or '')} | {'; '.join(notes)} |")
    return rows


def _exit_codes(path: str, help_text: str) -> str:
    """The command's row of `EXITS`, else what its help says (the command declares no table)."""
    tail = f"{exit_codes.INTERNAL_ERROR} internal error; {exit_codes.USAGE} usage"
    if path in EXITS:
        return f"{EXITS[path]}; {tail}"
    said = f" Its help says: {_cell(help_text)}." if "exit" in help_text else ""
    return f"not declared in `EXITS` (every command: {tail}).{said}"


def undeclared() -> list[str]:
    """The leaf commands whose exit codes `EXITS` does not declare."""
    return [
        " ".join(path) for path, p, _ in _commands(parser()) if _is_leaf(p) and " ".join(path) not in EXITS
    ]


def reference_markdown() -> str:
    top = parser()
    lines = [
        "# Command reference",
        "",
        "Generated from the argparse tree (`eval_assets/cli`) and its exit-code table (`EXITS`) by",
        "`bash scripts/cli_reference`; `tests/test_cli_reference.py` fails when this file differs from the code.",
        "",
        f"Every command exits {exit_codes.INTERNAL_ERROR} on an internal error (never a decision) and "
        f"{exit_codes.USAGE} on a usage error; what the",
        "other codes mean is in [exit-codes.md](exit-codes.md).",
        "",
        "## evaltrack",
        "",
        _cell(top.description or ""),
        "",
        "```",
        _usage(top),
        "```",
        "",
        "| argument | help | notes |",
        "| --- | --- | --- |",
        *_argument_rows(top),
    ]
    for path, p, help_text in _commands(top):
        name = " ".join(path)
        lines += ["", f"## evaltrack {name}", "", _cell(help_text) or "(no help)", ""]
        lines += ["```", _usage(p), "```"]
        rows = _argument_rows(p)
        if rows:
            lines += ["", "| argument | help | notes |", "| --- | --- | --- |", *rows]
        if _is_leaf(p):
            lines += ["", f"Exit codes: {_exit_codes(name, help_text)}"]
        else:
            subs = [f"`{path[0]}`" for path, _, _ in _commands(p) if len(path) == 1]
            lines += ["", "Sub-commands: " + ", ".join(subs) + "."]
    return "\n".join(lines) + "\n"

"""docs/reference/cli.md and docs/reference/exit-codes.md, rendered from the argparse tree (`parser()`),
each leaf command's declared exit codes and the table `eval_assets.exit_codes`.

`scripts/cli_reference` writes them; tests/test_cli_reference.py fails when a checked-in file differs.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from eval_assets import exit_codes
from eval_assets.cli import parser
from eval_assets.cli.arguments import exits_text

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


def leaves(
    top: argparse.ArgumentParser | None = None,
) -> list[tuple[str, argparse.ArgumentParser]]:
    """Every leaf command (`build add`, `run`, ...) and its parser, in the parser's order."""
    return [(" ".join(path), p) for path, p, _ in _commands(top or parser()) if _is_leaf(p)]


def declared_exits(name: str, p: argparse.ArgumentParser) -> dict[int, str]:
    """The exit codes leaf command `name` declares (`arguments.command`); a leaf made another way has none."""
    exits = getattr(p, "exits", None)
    if not exits:
        raise ValueError(f"evaltrack {name} declares no exit codes (make it with arguments.command)")
    return dict(exits)


def reference_markdown() -> str:
    top = parser()
    lines = [
        "# Command reference",
        "",
        "Generated from the argparse tree (`eval_assets/cli`) and the exit codes each command declares by",
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
            lines += ["", f"Exit codes: {_cell(exits_text(declared_exits(name, p)))}"]
        else:
            subs = [f"`{path[0]}`" for path, _, _ in _commands(p) if len(path) == 1]
            lines += ["", "Sub-commands: " + ", ".join(subs) + "."]
    return "\n".join(lines) + "\n"


def exit_codes_markdown() -> str:
    """docs/reference/exit-codes.md: the codes (`eval_assets.exit_codes`), then each command's."""
    codes = {**exit_codes.MEANING}
    decisions = {code: name for name, code in exit_codes.DECISION.items()}
    lines = [
        "# Exit codes and errors",
        "",
        "Generated from `eval_assets/exit_codes.py` and the exit codes each command declares by",
        "`bash scripts/cli_reference`; `tests/test_cli_reference.py` fails when this file differs from the code.",
        "The same words end each command's `--help` and its section of [cli.md](cli.md).",
        "",
        "| code | meaning | as a decision (`release-status`) |",
        "| --- | --- | --- |",
        *(
            f"| {code} | {_cell(meaning)} | {decisions.get(code, 'never a decision')} |"
            for code, meaning in sorted(codes.items())
        ),
        "",
        "| command | exit codes |",
        "| --- | --- |",
        *(f"| `evaltrack {name}` | {_cell(exits_text(declared_exits(name, p)))} |" for name, p in leaves()),
        "",
        "## Errors",
        "",
        *_ERRORS,
    ]
    return "\n".join(lines) + "\n"


_ERRORS = (
    "No traceback reaches stdout, stderr, a stored column or the Dagster event log: an error is one line naming",
    "its cause (for `run`/`demo`, a failed step's root cause with its build, and each distinct attempt failure",
    "with its first attempt); `evaltrack --debug ...` also appends its cause chain (redacted, one line per",
    "exception, no stack frames) to `$EVAL_HOME/logs/debug.log`.",
    "",
    f"Exit code {exit_codes.INTERNAL_ERROR} means an internal error, never a decision: a damaged or missing "
    "warehouse file of the",
    "build or of an input its decision rests on (named on stderr with its table and build), a missing or",
    "damaged partition manifest or build manifest, or an unexpected failure of any command. CI must not",
    "read it as allow, block, none or investigate; fix the cause (re-materialize the named partition) and ask",
    f"again. Exit code {exit_codes.USAGE} is a usage error of any command (the arguments could not be parsed).",
    "",
    "Ids (builds, judge names and versions, scenarios) follow one grammar: lower-case letters, digits, `.`,",
    "`_`, `-`, starting with a letter or digit, no `..`, at most 128 characters, not `trend`, `board`, `all`,",
    "`latest` or `none`.",
)

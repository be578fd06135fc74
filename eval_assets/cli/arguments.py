"""What every command's parser shares: the parser class, the argument types (the id grammar, counts,
ports, days), `--format`, and `command`/`group`, with which each command module registers its own
commands (`register(sub)`), each leaf with its exit codes from `eval_assets.exit_codes`.

Light on purpose: the top-level parser imports every command module to assemble itself, so a command
module imports only this, the configuration and the standard library at its top; what it needs to run
is imported inside its handler.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from datetime import date
from typing import Any, NoReturn

from eval_assets import exit_codes

Handler = Callable[[argparse.Namespace], int]
Commands = argparse._SubParsersAction  # what `register(sub)` adds its commands to


class CommandParser(argparse.ArgumentParser):
    """Usage errors exit USAGE, never a decision's code; a parser with `help_exit_code` set
    (release-status, whose success means allow) exits with that code after printing its help.
    `exits`: a leaf command's exit codes and what each means (`command`)."""

    help_exit_code: int = exit_codes.OK
    exits: Mapping[int, str] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # no prefix of an option stands for it: `--judge` is not `--judge-version`, now or later
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        line = " ".join(message.split())  # one line, whatever the message held
        self.exit(exit_codes.USAGE, f"{self.prog}: error: {line} (see {self.prog} --help)\n")

    def exit(self, status: int = exit_codes.OK, message: str | None = None) -> NoReturn:
        super().exit(self.help_exit_code if status == exit_codes.OK else status, message)


def exits_text(exits: Mapping[int, str]) -> str:
    """`0 written; 1 refused; 4 internal error; 64 usage`: a command's codes in order, the codes every
    command has (`exit_codes.EVERY_COMMAND`) filled in where it does not give them its own words."""
    every = {**exit_codes.EVERY_COMMAND, **exits}
    return "; ".join(f"{code} {every[code]}" for code in sorted(every))


def command(sub: Commands, name: str, *, help: str, run: Handler, exits: Mapping[int, str]) -> CommandParser:
    """The leaf command `name` (run by `run`); `exits` maps each code it answers, from
    `eval_assets.exit_codes`, to what it means there, and closes its --help."""
    undeclared = sorted(set(exits) - set(exit_codes.MEANING))
    if undeclared:
        raise ValueError(f"{name}: exit codes {undeclared} are not in eval_assets.exit_codes")
    p: CommandParser = sub.add_parser(name, help=help, epilog=f"exit codes: {exits_text(exits)}")
    p.exits = dict(exits)
    p.set_defaults(func=run)
    return p


def group(sub: Commands, name: str, *, help: str) -> Commands:
    """A command with sub-commands (`evaltrack NAME SUB ...`); `args.NAME_command` names the one given."""
    parent: CommandParser = sub.add_parser(name, help=help)
    return parent.add_subparsers(dest=f"{name}_command", required=True)


def format_option(p: argparse.ArgumentParser, *choices: str) -> None:
    """The one output flag, `--format` (text by default)."""
    p.add_argument("--format", choices=choices, default="text", help=f"output: {', '.join(choices)}")


def id_arg(text: str) -> str:
    """An argument that names a build, judge name or judge version: the one id grammar
    (`config.id_problem`), refused as a usage error naming the argument."""
    from eval_assets.config import id_problem  # the grammar alone (config is imported by every command)

    if (problem := id_problem(text)) is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def count_arg(text: str) -> int:
    """A whole number 0 or more (a milestone): `-1`, `1.5` or `x` is a usage error."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value <= 2**63 - 1:
        raise argparse.ArgumentTypeError(f"{value} is out of range (0 to 2**63 - 1)")
    return value


def port_arg(text: str) -> int:
    """A TCP port, 1 to 65535."""
    value = count_arg(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a TCP port (1 to 65535)")
    return value


def day_arg(text: str) -> date:
    """A UTC day, YYYY-MM-DD."""
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a day YYYY-MM-DD: {text!r}") from None

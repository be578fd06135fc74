"""Every command argument that takes an id or a number is checked by one grammar (issue 45): walked over
the whole argparse tree, so a new `--build` without the check fails here, and for each such argument a
refused value is a usage error (64) with one line on stderr, never 0 and never a command that ran."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eval_assets import exit_codes
from eval_assets.cli import main, parser
from eval_assets.cli.arguments import count_arg, id_arg, port_arg
from eval_assets.config import RESERVED_IDS, id_problem

ID_DESTS = {
    "build",
    "builds",
    "baseline",
    "candidate",
    "judge_version",
    "judge",
    "judge_name",
    "from_version",
    "to_version",
}
"""Destinations that name a build, a judge name or a judge version."""
NUMBER_TYPES = (count_arg, port_arg)
OWN_CHECK = {("release-status", "build")}  # checks the grammar itself: exit 1 (docs/reference/cli.md)


def commands(
    p: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from commands(child, (*path, name))
    if path:
        yield path, p


def arguments() -> list[tuple[tuple[str, ...], argparse.Action]]:
    out = []
    for path, p in commands(parser()):
        for action in p._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            out.append((path, action))
    return out


ARGS = arguments()
ID_ARGS = [(path, a) for path, a in ARGS if a.dest in ID_DESTS and (path[0], a.dest) not in OWN_CHECK]
NUMBER_ARGS = [(path, a) for path, a in ARGS if a.type in NUMBER_TYPES]


def test_every_id_argument_is_checked_by_the_grammar_and_no_number_is_a_bare_int() -> None:
    unchecked = [f"{' '.join(p)} {a.option_strings or a.dest}" for p, a in ID_ARGS if a.type is not id_arg]
    assert unchecked == []
    assert len(ID_ARGS) >= 14  # run, report, compare, trajectory, review, bridge, trend, spend
    bare = [f"{' '.join(p)} {a.option_strings}" for p, a in ARGS if a.type in (int, float)]
    assert bare == []
    assert {(p, a.dest) for p, a in NUMBER_ARGS} == {(("gates", "run"), "milestone"), (("ui",), "port")}


def refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What `main(args)` printed on stderr, read (and so cleared) here: each example reads only its own."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as raised:
        main(args)
    assert raised.value.code == exit_codes.USAGE, args
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


BAD_IDS = st.one_of(
    st.sampled_from(sorted(RESERVED_IDS)),
    st.sampled_from(["../x", "..", "a..b", "A", "Agent", "a/b", "a b", "ä", "", "a" * 129, "-x", ".x", "_x"]),
    st.text(min_size=1, max_size=20).filter(lambda t: id_problem(t) is not None and not t.startswith("-")),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(ID_ARGS), bad=BAD_IDS)
def test_an_id_the_grammar_refuses_is_a_usage_error_in_every_command(
    which: tuple[tuple[str, ...], argparse.Action], bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path, action = which
    option = action.option_strings[0] if action.option_strings else None
    # a value is converted as it is read, before missing arguments are looked for
    err = refused([*path, f"{option}={bad}"] if option else [*path, "--", bad], capsys)
    assert (
        f"error: argument {option or action.dest}:" in err or f"error: argument {action.metavar}:" in err
    ), err


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    which=st.sampled_from(NUMBER_ARGS),
    bad=st.one_of(
        st.integers(max_value=-1).map(str),
        st.sampled_from(["1.5", "x", "", "0x10", "1e3", " ", "99999999999999999999999"]),
    ),
)
def test_a_number_out_of_its_range_is_a_usage_error(
    which: tuple[tuple[str, ...], argparse.Action], bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path, action = which
    refused([*path, f"{action.option_strings[0]}={bad}"], capsys)


@pytest.mark.parametrize(
    "args",
    [
        ["spend", "--build", "../x"],
        ["gates", "run", "--milestone", "-1"],
        ["run", "--build", "trend"],
        ["compare", "--baseline", "a", "--candidate", "b", "--judge-version", "../v"],
        ["ui", "--port", "70000"],
    ],
)
def test_the_issues_reproductions_are_refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(args, capsys)
    assert re.match(r"^evaltrack [a-z ]+: error: argument ", err)


def test_valid_values_pass_the_checks() -> None:
    assert id_arg("agent-2026.11.29_rebuild") == "agent-2026.11.29_rebuild"
    assert count_arg("0") == 0 and count_arg("12") == 12 and port_arg("3000") == 3000
    assert port_arg("65535") == 65535 and port_arg("1") == 1
    for bad, check in (("65536", port_arg), ("0", port_arg), ("-0x1", count_arg)):
        with pytest.raises(argparse.ArgumentTypeError):
            check(bad)

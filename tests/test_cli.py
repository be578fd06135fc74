"""`evaltrack` as a user runs it: exit codes, messages, nothing written on bad input."""

from __future__ import annotations

import argparse
import importlib
import shutil
from pathlib import Path

import pytest
from shared import fresh_python

from eval_assets import exit_codes
from eval_assets.cli import main
from eval_assets.cli import parser as cli_parser
from eval_assets.cli.arguments import exits_text
from eval_assets.cli.reference import declared_exits, leaves
from eval_assets.home import EvalHome

ROOT = Path(__file__).resolve().parents[1]


def test_validate_passes_on_the_shipped_project(capsys: pytest.CaptureFixture[str], home: EvalHome) -> None:
    assert main(["validate"]) == 0
    assert "scenarios" in capsys.readouterr().out


def test_validate_prints_every_problem_as_path_field_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], home: EvalHome
) -> None:
    project = tmp_path / "p"
    for sub in ("scenarios", "rubrics", "judges"):
        shutil.copytree(ROOT / sub, project / sub)
    shutil.copy(ROOT / "evaltrack.yaml", project / "evaltrack.yaml")
    first = sorted((project / "scenarios").rglob("*.yaml"))[0]
    first.write_text(first.read_text() + "surprise: 1\n")
    judge = sorted((project / "judges").glob("*.yaml"))[0]
    judge.write_text(judge.read_text().replace("version: 1", "version: one", 1))
    assert main(["--project", str(project), "validate"]) == 1
    err = capsys.readouterr().err
    assert f"{first.relative_to(project)}: surprise: unknown field" in err
    assert f"{judge.relative_to(project)}: version: " in err


def test_build_add_rejects_a_bad_manifest_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], home: EvalHome
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        (ROOT / "examples/builds/baseline.yaml").read_text().replace("sim/agent", "nosuchprovider/x")
    )
    assert main(["build", "add", str(bad)]) == 1
    assert "subject.model: unknown model provider 'nosuchprovider'" in capsys.readouterr().err
    assert list(home.builds.iterdir()) == []


def test_build_add_stores_the_manifest_and_the_ui_s_start_adds_its_partition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], home: EvalHome
) -> None:
    """`build add` stores the manifest (what it imports: benchmarks/command_start.py); the partition
    is added by what opens the instance next: here the registration `evaltrack ui` does before it
    starts the UI, which skips a manifest that no longer loads."""
    manifest = ROOT / "examples/builds/baseline.yaml"
    assert main(["build", "add", str(manifest)]) == 0
    assert [p.name for p in home.builds.iterdir()] == ["agent-2026-11-28-base.yaml"]
    (home.builds / "broken.yaml").write_text("id: [")
    from eval_assets.cli.orchestrate import add_registered_build_partitions, instance_for
    from eval_assets.config import project_at

    assert not instance_for(home).has_dynamic_partition("build", "agent-2026-11-28-base")
    warned: list[str] = []
    assert add_registered_build_partitions(home, project_at(ROOT), warned.append) == ["agent-2026-11-28-base"]
    assert instance_for(home).get_dynamic_partitions("build") == ["agent-2026-11-28-base"]
    assert len(warned) == 1 and warned[0].startswith("skipping build broken:"), warned
    assert add_registered_build_partitions(home, project_at(ROOT), warned.append) == []  # once


def test_run_on_an_unknown_build_exits_1_with_the_fix(
    capsys: pytest.CaptureFixture[str], home: EvalHome
) -> None:
    assert main(["run", "--build", "never-registered"]) == 1
    assert "evaltrack build add" in capsys.readouterr().err


def _blocked_build(home: EvalHome) -> str:
    """A registered build whose recorded decision is block (a failing gate), decided without Dagster."""
    from shared import record_one_gate_suite

    from eval_assets.capability.track import Track
    from eval_assets.config import load_project
    from eval_assets.release import write_release_decision
    from eval_assets.suite import suite_evidence

    track = Track(load_project(ROOT), home)
    build = track.register_build(ROOT / "examples/builds/baseline.yaml").id
    record_one_gate_suite(track, build, failing=True)
    write_release_decision(track, build, "decision-run", lambda: [suite_evidence(track, build)])
    return build


def test_release_status_markdown_groups_the_reasons_by_severity_ready_for_a_pull_request(
    capsys: pytest.CaptureFixture[str], home: EvalHome
) -> None:
    build = _blocked_build(home)
    assert main(["release-status", build, "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"## {build}: block\n")
    block, rest = out.split("### Block\n", 1)[1].split("### No decision\n", 1)
    assert "#### deterministic_suite" in block and "config.example-builds-validate" in block
    # each judge version has one heading; no reason repeats the "judge X, A vs B:" source prefix
    for version in ("helpfulness-v1", "safety-v1"):
        assert sum(1 for line in rest.splitlines() if line.startswith("####") and version in line) == 1, rest
    assert not any(line.startswith("- judge ") or "vs baseline:" in line for line in out.splitlines())
    assert "{" not in out and max(len(line) for line in out.splitlines()) <= 200


def test_release_status_prints_a_table_and_json_for_ci(
    capsys: pytest.CaptureFixture[str], home: EvalHome
) -> None:
    import json

    build = _blocked_build(home)
    assert main(["release-status", build]) == 1
    text = capsys.readouterr().out
    assert text.splitlines()[1].split() == ["severity", "source", "reason"]
    assert "{'" not in text and max(len(line) for line in text.splitlines()) <= 200
    assert main(["release-status", build, "--format", "json"]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["decision"] == "block" and record["reasons"][0]["severity"] == "block"


LEAVES = dict(leaves())


@pytest.mark.parametrize("command", sorted(LEAVES))
def test_every_leaf_command_s_help_ends_with_the_exit_codes_it_declares(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each leaf declares its codes from `eval_assets.exit_codes` (with the internal-error and usage codes
    every command has), and its --help ends with them."""
    exits = declared_exits(command, LEAVES[command])
    assert set(exits) <= set(exit_codes.MEANING) and exits
    with pytest.raises(SystemExit) as done:
        cli_parser().parse_args([*command.split(), "--help"])
    shown = "".join(capsys.readouterr().out.split())  # the help wraps lines (at hyphens too)
    rendered = exits_text(exits)
    assert f"{exit_codes.INTERNAL_ERROR} " in rendered and f"{exit_codes.USAGE} " in rendered
    assert shown.endswith("".join(f"exit codes: {rendered}".split()))
    assert done.value.code == (exit_codes.USAGE if command == "release-status" else exit_codes.OK)


def test_the_main_commands_positionals_and_build_option_have_help() -> None:
    for main_command in ("build add", "run", "report", "release-status"):
        for action in LEAVES[main_command]._actions:
            if action.option_strings == ["--build"] or not action.option_strings:
                assert action.help, (main_command, action.dest)


# 0.x, nothing released: an option's old spelling is an unknown option (a usage error), not an alias.
OLD_SPELLINGS = [
    ["run", "--build", "b1", "--judge", "helpfulness-v1"],
    ["run", "--build", "b1", "--json"],
    ["demo", "--json"],
    ["compare", "--baseline", "a", "--candidate", "b", "--judge-version", "j-v1", "--judge", "j-v1"],
    ["trajectory", "convert", "x.jsonl", "--out", "o", "--judge", "safety"],
    ["review", "next", "--reviewer", "ana", "--json"],
    ["gates", "run", "--build", "m.yaml"],
    ["gates", "run", "--milestone", "0", "--json"],
    ["release-status", "b1", "--json"],
    ["bridge", "run", "--from", "a-v1", "--to", "a-v2", "--json"],
    ["trend", "--json"],
    ["spend", "--json"],
]


@pytest.mark.parametrize("argv", OLD_SPELLINGS, ids=" ".join)
def test_an_old_option_spelling_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    old = next(a for a in argv if a in ("--judge", "--json") or (a == "--build" and argv[0] == "gates"))
    with pytest.raises(SystemExit) as done:
        cli_parser().parse_args(argv)
    assert done.value.code == exit_codes.USAGE
    assert f"unrecognized arguments: {old}" in capsys.readouterr().err


def test_compare_without_a_judge_version_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], home: EvalHome
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["compare", "--baseline", "a", "--candidate", "b"])
    assert done.value.code == exit_codes.USAGE
    assert "the following arguments are required: --judge-version" in capsys.readouterr().err


_CALLER_GARBAGE = """
import gc, json, sys, weakref
from eval_assets.cli import main
class Node:
    pass
def cycle():
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)
gc.disable()
before = cycle()  # the caller's garbage, made before it calls the command in its own process
code = main(["--project", sys.argv[1], "validate"])
enabled = gc.isenabled()
gc.collect()
print(json.dumps([code, enabled, before() is None]))
"""


def test_a_caller_of_main_keeps_its_collector_and_its_garbage_stays_collectable(tmp_path: Path) -> None:
    """`main(argv)` in a process that goes on (a test, a notebook) leaves the collector as it was and
    freezes nothing: what the caller made before is collected as before. The command's own process
    freezes its heap as it returns (what that saves: benchmarks/gc_freeze.py)."""
    code, enabled, collected = fresh_python(
        _CALLER_GARBAGE, str(ROOT), cwd=tmp_path, EVAL_HOME=str(tmp_path / "home")
    )
    assert code == 0
    assert enabled is False  # as the caller left it
    assert collected is True


def _options(p: argparse.ArgumentParser) -> list[tuple[tuple[str, ...], str]]:
    return [(tuple(a.option_strings), a.dest) for a in p._actions if not isinstance(a, argparse._HelpAction)]


@pytest.mark.parametrize("command", sorted(LEAVES))
def test_every_leaf_command_s_arguments_are_defined_in_the_module_that_runs_it(command: str) -> None:
    """The module of a leaf's handler registers that leaf, with all its arguments, by itself
    (`register(sub)` on a parser of its own)."""
    from eval_assets.cli.arguments import CommandParser

    handler = LEAVES[command].get_default("func")
    module = importlib.import_module(handler.__module__)
    own = CommandParser(prog="own")
    module.register(own.add_subparsers(dest="command", required=True))
    registered = {p.get_default("func"): p for _, p in leaves(own)}
    assert handler in registered, (command, module.__name__)
    assert _options(registered[handler]) == _options(LEAVES[command])

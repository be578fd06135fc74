"""`evaltrack gates run`: the deterministic suite (the gate registry) for a build manifest or a
milestone, printed and nothing recorded; `gates no-network` (`no_network`) is its sibling."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from eval_assets import exit_codes
from eval_assets.cli.arguments import Commands, command, count_arg, format_option, group
from eval_assets.cli.common import print_problems, project_of
from eval_assets.cli.no_network import register as register_no_network
from eval_assets.config import ConfigError, load_build


def register(sub: Commands) -> None:
    gates = group(sub, "gates", help="the deterministic suite (gates/)")
    run = command(
        gates,
        "run",
        help="run the gate registry for a build manifest or a milestone",
        run=cmd_gates_run,
        exits={
            exit_codes.OK: "nothing blocks",
            exit_codes.REFUSED: "something blocks, no gate matched, or the selection is refused",
        },
    )
    run.add_argument("--manifest", help="a build manifest file (its milestone and subject)")
    run.add_argument("--milestone", type=count_arg, help="a milestone (no build, no subject)")
    run.add_argument("--only", action="append", help="run only this id (repeatable)")
    run.add_argument("--exclude", action="append", help="leave this id out (repeatable)")
    run.add_argument(
        "--kind", action="append", help="run only this kind: structural, property, corpus, case, test"
    )
    format_option(run, "text", "json")
    register_no_network(gates)


def cmd_gates_run(args: argparse.Namespace) -> int:
    from eval_assets.gates import REVIEW_QUEUE_HOOK, read_registry, run_suite
    from eval_assets.review import UncertainEffects

    if (args.manifest is None) == (args.milestone is None):
        print("error: give exactly one of --manifest FILE and --milestone N", file=sys.stderr)
        return exit_codes.REFUSED
    try:
        project = project_of(args)
        manifest = load_build(Path(args.manifest).resolve(), project) if args.manifest else None
    except ConfigError as exc:
        return print_problems(exc)
    registry = read_registry(project.root)
    result = run_suite(
        registry,
        milestone=manifest.milestone if manifest else args.milestone,
        build=manifest.id if manifest else None,
        root=project.root,
        subject=manifest.subject if manifest else None,
        only=set(args.only) if args.only else None,
        exclude=set(args.exclude or ()),
        kinds=set(args.kind) if args.kind else None,
        hooks={REVIEW_QUEUE_HOOK: UncertainEffects},
    )
    code = exit_codes.REFUSED if result.blocking or not result.results else exit_codes.OK
    if args.format == "json":
        rows = [
            {
                "gate_id": r.gate_id,
                "kind": r.kind,
                "status": r.status,
                "blocks": r.blocks,
                "message": r.message,
            }
            for r in result.results
        ]
        report = {"build": result.build, "milestone": result.milestone, "exit_code": code, "results": rows}
        print(json.dumps(report, sort_keys=True))
        return code
    for r in result.results:
        print(
            f"{r.status:>19}  {r.gate_id} [{r.kind}, milestone {r.milestone}]  {r.message.splitlines()[0] if r.message else ''}"
        )
        for finding in r.findings:
            print(f"{'':>21}- {finding}")
    if not result.results:
        print("no gate matched the selection", file=sys.stderr)
    print(f"{len(result.results)} row(s), {len(result.blocking)} blocking")
    return code

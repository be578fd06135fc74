"""`evaltrack gates no-network`: the recorded no-network run of the example builds' suites.

The command is meant to run inside a network namespace with only loopback and a clean environment
(`scripts/suite_no_network` starts it so); it records what it saw and what ran
(eval_assets/gates/project_checks/network.py) and succeeds only if the record is a proof.
"""

from __future__ import annotations

import argparse
import json
import sys

from eval_assets import exit_codes
from eval_assets.cli.arguments import Commands, command
from eval_assets.cli.common import home_of, root_of


def register(gates: Commands) -> None:
    """`gates no-network`, under the `gates` group (`gates_commands.register`)."""
    command(
        gates,
        "no-network",
        help="record the no-network proof (scripts/suite_no_network runs it inside a network namespace)",
        run=cmd_gates_no_network,
        exits={
            exit_codes.OK: "the record is a proof",
            exit_codes.REFUSED: "it is not (each problem printed)",
        },
    )


def cmd_gates_no_network(args: argparse.Namespace) -> int:
    from eval_assets.gates.project_checks.network import record_no_network, record_problems  # and Dagster

    root = root_of(args)
    home = home_of(args)
    record, path = record_no_network(root, home.root)
    problems = record_problems(root, record)
    problems += [
        f"{b.get('build') or b['manifest']}: exit {b['exit_code']}"
        for b in record["builds"]
        if b["exit_code"] != exit_codes.OK
    ]
    for b in record["builds"]:
        print(
            f"{b.get('build') or b['manifest']}: exit {b['exit_code']} {b.get('counts')} ({b['seconds']} s)"
        )
    print(f"network: {json.dumps(record['network'], sort_keys=True)}")
    print(f"record: {path} ({record['seconds']} s)")
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    return exit_codes.REFUSED if problems else exit_codes.OK

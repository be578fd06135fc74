"""`evaltrack gates run`: the deterministic suite (the gate registry) for a build manifest or a
milestone, printed and nothing recorded; exit 0 when nothing blocks, 1 when something does."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from eval_assets.config import ConfigError, load_build
from eval_assets.gates import REVIEW_QUEUE_HOOK, read_registry, run_suite
from eval_assets.review import UncertainEffects

from .common import print_problems, project_of


def cmd_gates_run(args: argparse.Namespace) -> int:
    if (args.manifest is None) == (args.milestone is None):
        print("error: give exactly one of --manifest FILE and --milestone N", file=sys.stderr)
        return 1
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
    code = 1 if result.blocking or not result.results else 0
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

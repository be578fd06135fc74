"""`evaltrack trajectory convert` and `evaltrack scores import`: files in, all or nothing."""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path

from eval_assets import exit_codes
from eval_assets.cli.arguments import Commands, command, group, id_arg
from eval_assets.cli.common import home_of, print_problems, project_of
from eval_assets.config import ConfigError


def register(sub: Commands) -> None:
    trajectory = group(sub, "trajectory", help="trajectory export → converted cases")
    convert = command(
        trajectory,
        "convert",
        help="convert a redacted export into scenarios (docs/trajectory-export.md); writes all or nothing",
        run=cmd_trajectory_convert,
        exits={
            exit_codes.OK: "converted",
            exit_codes.REFUSED: "refused (each problem printed) or --out cannot be written; nothing written",
        },
    )
    convert.add_argument("export", help="the redacted trajectory export (JSONL)")
    convert.add_argument("--out", required=True, help="output directory, e.g. scenarios/converted/")
    convert.add_argument(
        "--judge-name",
        dest="judge_name",
        default="helpfulness",
        type=id_arg,
        help="judge name of every case (default: helpfulness)",
    )
    convert.add_argument("--suite", default="converted", help="suite of every case (default: converted)")
    scores = group(sub, "scores", help="human scores")
    imp = command(
        scores,
        "import",
        help="append human scores from a CSV or JSONL file (all rows or none)",
        run=cmd_scores_import,
        exits={exit_codes.OK: "imported", exit_codes.REFUSED: "refused, the reason printed (no row stored)"},
    )
    imp.add_argument("file", help="human scores, CSV or JSONL (docs/howto/review.md)")


def cmd_trajectory_convert(args: argparse.Namespace) -> int:
    """Convert a redacted trajectory export into scenario files; all or nothing."""
    from eval_assets.trajectory import ExportRefused, convert_export

    try:
        project = project_of(args)
        report = convert_export(
            Path(args.export),
            Path(args.out),
            judge=args.judge_name,
            suite=args.suite,
            known_judges=sorted({j.name for j in project.active_judges}),
            max_bytes=project.settings.bounds.max_trajectory_bytes,
        )
    except ConfigError as exc:
        return print_problems(exc)
    except ExportRefused as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        print(f"refused: {len(exc.problems)} problem(s); nothing was written", file=sys.stderr)
        return exit_codes.REFUSED
    except OSError as exc:  # e.g. --out under a file or a read-only directory; staged files are removed
        print(f"{args.out}: cannot write: {exc.strerror or exc}; nothing was written", file=sys.stderr)
        return exit_codes.REFUSED
    print(report.text())
    print(
        f"cases in {args.out}: source: trajectory, awaiting assertions (never blocking until a person adds them)"
    )
    return exit_codes.OK


def cmd_scores_import(args: argparse.Namespace) -> int:
    from eval_assets.capability.track import Track
    from eval_assets.human_scores import HumanScoreError, import_scores

    try:
        track = Track(project_of(args), home_of(args))
        summary = import_scores(track, Path(args.file), f"import-{uuid.uuid4().hex[:12]}")
    except ConfigError as exc:
        return print_problems(exc)
    except HumanScoreError as exc:
        print(exc, file=sys.stderr)
        return exit_codes.REFUSED
    print(summary)
    return exit_codes.OK

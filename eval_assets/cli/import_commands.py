"""`evaltrack trajectory convert` and `evaltrack scores import`: files in, all or nothing."""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path

from eval_assets.capability.track import Track
from eval_assets.cli.common import home_of, print_problems, project_of
from eval_assets.config import ConfigError
from eval_assets.human_scores import HumanScoreError, import_scores
from eval_assets.trajectory import ExportRefused, convert_export


def cmd_trajectory_convert(args: argparse.Namespace) -> int:
    """Convert a redacted trajectory export into scenario files; all or nothing."""
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
        return 1
    except OSError as exc:  # e.g. --out under a file or a read-only directory; staged files are removed
        print(f"{args.out}: cannot write: {exc.strerror or exc}; nothing was written", file=sys.stderr)
        return 1
    print(report.text())
    print(
        f"cases in {args.out}: source: trajectory, awaiting assertions (never blocking until a person adds them)"
    )
    return 0


def cmd_scores_import(args: argparse.Namespace) -> int:
    try:
        track = Track(project_of(args), home_of(args))
        summary = import_scores(track, Path(args.file), f"import-{uuid.uuid4().hex[:12]}")
    except ConfigError as exc:
        return print_problems(exc)
    except HumanScoreError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(summary)
    return 0

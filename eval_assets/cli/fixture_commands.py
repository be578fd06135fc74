"""`evaltrack fixtures record`: a model script from one live run of a case, for a person to review."""

from __future__ import annotations

import argparse
import sys

from eval_assets.cli.common import home_of, print_problems, project_of
from eval_assets.config import ConfigError
from eval_assets.gates import RecordRefused, record_script
from eval_assets.spend import journal_url


def cmd_fixtures_record(args: argparse.Namespace) -> int:
    """Exit 0: written (path printed); 1: refused or the live run failed, nothing written."""
    try:
        project = project_of(args)
        home = home_of(args)
        recording = record_script(
            project,
            args.case,
            args.model,
            journal_url=journal_url(home.root, project.settings.spend.journal_url),
            name=args.name,
            api_base=args.api_base,
            force=args.force,
        )
    except ConfigError as exc:
        return print_problems(exc)
    except RecordRefused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    shown = recording.path.relative_to(project.root)
    print(
        f"wrote {shown}: {recording.turns} turn(s), {recording.tool_calls} tool call(s), "
        f"cost ${recording.cost_usd:.6f}\n"
        f"review it, then price `script/{recording.name}` under `prices:` in evaltrack.yaml and name it in "
        f"a case with `model_fixture: {recording.name}`"
    )
    return 0

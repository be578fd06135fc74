"""`evaltrack fixtures record`: a model script from one live run of a case, for a person to review."""

from __future__ import annotations

import argparse
import sys

from eval_assets import exit_codes
from eval_assets.cli.arguments import Commands, command, group
from eval_assets.cli.common import home_of, print_problems, project_of
from eval_assets.config import ConfigError


def register(sub: Commands) -> None:
    fixtures = group(sub, "fixtures", help="model scripts (gates/fixtures/models/)")
    rec = command(
        fixtures,
        "record",
        help="run a case once live against a model and write its script for review (never automatic)",
        run=cmd_fixtures_record,
        exits={
            exit_codes.OK: "written (the path printed)",
            exit_codes.REFUSED: "refused or the live run failed (nothing written)",
        },
    )
    rec.add_argument("--case", required=True, help="a case id (gates/cases/) or a converted scenario id")
    rec.add_argument("--model", required=True, help="a priced litellm model, e.g. openai/gpt-4o-mini")
    rec.add_argument("--name", help="script name (default: the case id) -> gates/fixtures/models/NAME.yaml")
    rec.add_argument(
        "--api-base", dest="api_base", help="the model's endpoint, if not its provider's default"
    )
    rec.add_argument("--force", action="store_true", help="overwrite an existing script")


def cmd_fixtures_record(args: argparse.Namespace) -> int:
    """Write the script of one live run of a case (the path printed); refused or failed: nothing written."""
    from eval_assets.gates import RecordRefused, record_script  # the engine, only when recording
    from eval_assets.spend import journal_url

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
        return exit_codes.REFUSED
    shown = recording.path.relative_to(project.root)
    print(
        f"wrote {shown}: {recording.turns} turn(s), {recording.tool_calls} tool call(s), "
        f"cost ${recording.cost_usd:.6f}\n"
        f"review it, then price `script/{recording.name}` under `prices:` in evaltrack.yaml and name it in "
        f"a case with `model_fixture: {recording.name}`"
    )
    return exit_codes.OK

"""`evaltrack spend`: what the spend journal holds right now against the ceilings that stop calls.

The warehouse's `daily_spend` view reads the published `cost_ledger`; this reads the journal itself, so it
also shows what is in flight (reserved, not yet settled) while a run works, which is what a ceiling is
checked against (docs/methods.md: spend ceilings). Reading only: a home without a journal has spent nothing,
and none is created.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

from eval_assets import exit_codes
from eval_assets.cli.arguments import Commands, command, day_arg, format_option, id_arg
from eval_assets.cli.common import home_path, project_of
from eval_assets.cli.status_commands import internal_error
from eval_assets.config import ConfigError, Project
from eval_assets.present import text_table

if TYPE_CHECKING:
    from eval_assets.spend import ScopeTotal


def register(sub: Commands) -> None:
    spend = command(
        sub,
        "spend",
        help="the spend journal's running totals (spent and in flight) against the ceilings",
        run=cmd_spend,
        exits={
            exit_codes.OK: "printed (a home that never paid has spent nothing)",
            exit_codes.INTERNAL_ERROR: "the journal or the project cannot be read",
        },
    )
    spend.add_argument(
        "--day", type=day_arg, help="the UTC day YYYY-MM-DD whose total is shown (default: today)"
    )
    spend.add_argument("--build", type=id_arg, help="only this build's suites, and its scenarios")
    format_option(spend, "text", "json")


@dataclass(frozen=True)
class Line:
    """One scope's running total beside the ceiling that applies to it (None: no ceiling)."""

    scope: str
    key: str
    spent_usd: float
    in_flight_usd: float
    ceiling_usd: float | None

    @property
    def used(self) -> float | None:
        """committed / ceiling; None without a ceiling (a ceiling of 0 is always full)."""
        if self.ceiling_usd is None:
            return None
        committed = self.spent_usd + self.in_flight_usd
        return committed / self.ceiling_usd if self.ceiling_usd > 0 else 1.0

    def record(self) -> dict[str, object]:
        return {
            "scope": self.scope,
            "key": self.key,
            "spent_usd": self.spent_usd,
            "in_flight_usd": self.in_flight_usd,
            "ceiling_usd": self.ceiling_usd,
            "used": self.used,
        }


def lines(project: Project, day: ScopeTotal, totals: list[ScopeTotal], build: str | None) -> list[Line]:
    """The day's line, then every suite's (build/judge version/generation), then, for `build`, every
    scenario's, each with the ceiling the engine applies to it (a scenario's own `ceiling_usd` first)."""
    spend = project.settings.spend

    def line(total: ScopeTotal, ceiling: float | None) -> Line:
        return Line(total.scope, total.key, total.spent_usd, total.outstanding_usd, ceiling)

    suites, scenarios = [], []
    for total in totals:
        owner = total.key.split("/", 1)[0]
        if total.scope == "suite" and build in (None, owner):
            suites.append(line(total, spend.suite_ceiling_usd))
        elif total.scope == "scenario" and owner == build:
            scenario = project.scenarios.get(total.key.split("/")[2])
            own = scenario.ceiling_usd if scenario is not None else None
            scenarios.append(line(total, own if own is not None else spend.scenario_ceiling_usd))
    return [line(day, spend.day_ceiling_usd), *suites, *scenarios]


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def cmd_spend(args: argparse.Namespace) -> int:
    from eval_assets.spend import JournalError, ScopeTotal, journal_file, journal_url, open_journal

    try:
        project, home = project_of(args), home_path(args)  # reads only: never creates the home
    except ConfigError as exc:
        return internal_error([str(p) for p in exc.problems], "fix the project configuration named above")
    day: date = args.day or datetime.now(UTC).date()
    url = journal_url(home.root, project.settings.spend.journal_url)
    if (missing := journal_file(url)) is not None and not missing.exists():
        totals: list[ScopeTotal] = []
        day_total = ScopeTotal("day", day.isoformat(), spent_usd=0.0, outstanding_usd=0.0)
        note = f"no spend recorded: no journal at {missing}"
    else:
        try:
            journal = open_journal(url)
            day_total, totals = journal.day_total(day), journal.scope_totals()
        except JournalError as exc:
            return internal_error([str(exc)], "nothing was read; check the journal named above")
        note = ""
    rows = lines(project, day_total, totals, args.build)
    if args.format == "json":
        print(json.dumps({"day": day.isoformat(), "scopes": [r.record() for r in rows]}, indent=2))
        return exit_codes.OK
    if note:
        print(note)
    print(
        text_table(
            ("scope", "key", "spent", "in flight", "ceiling", "used"),
            [
                (
                    r.scope,
                    r.key,
                    _usd(r.spent_usd),
                    _usd(r.in_flight_usd),
                    _usd(r.ceiling_usd),
                    "-" if r.used is None else f"{r.used:.1%}",
                )
                for r in rows
            ],
        )
    )
    return exit_codes.OK

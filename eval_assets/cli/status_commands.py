"""`evaltrack release-status`: a build's recorded decision, believed only on verified, current evidence.

This module is kept light (configuration, the warehouse's manifest and DuckDB, no pandas reads, no
engine, no Dagster): CI asks it after every build. `eval_assets.evidence` does the checking; here the
outcome becomes the decision's exit code, allow only when every input is present, verified and current.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from eval_assets import exit_codes
from eval_assets.capability.errors import TrackError
from eval_assets.cli.arguments import Commands, command, format_option, group
from eval_assets.cli.common import home_of, missing_home, project_of
from eval_assets.config import ConfigError, id_problem
from eval_assets.present import reasons_markdown, reasons_text_rows, terminal_width, text_table, wrapped

if TYPE_CHECKING:
    from eval_assets.evidence import CheckedDecision

DAMAGE = "damage found (each file named, moved aside, never deleted): an internal error, never a decision"


def register(sub: Commands) -> None:
    decision = exit_codes.DECISION
    status = command(
        sub,
        "release-status",
        help="print a build's decision (its exit code is the decision's)",
        run=cmd_release_status,
        exits={
            decision["allow"]: "allow (only on verified, current evidence)",
            decision["block"]: "block, or an id the grammar refuses",
            decision["none"]: "no decision yet, or stale",
            decision["investigate"]: "investigate",
            exit_codes.USAGE: "usage, and its --help (0 only ever means allow)",
        },
    )
    status.help_exit_code = exit_codes.USAGE  # it exits 0 only for allow, so not for its help either
    status.add_argument("build", help="a build id (the id grammar: docs/specs/configuration.md)")
    format_option(status, "text", "markdown", "json")  # markdown: ready to paste into a pull request
    warehouse = group(sub, "warehouse", help="the warehouse's files")
    verify = command(
        warehouse,
        "verify",
        help="re-hash every file against the partition manifest; damaged files are moved aside and named",
        run=cmd_warehouse_verify,
        exits={
            exit_codes.OK: "every file matches (or, with --rebuild, re-trusted)",
            exit_codes.INTERNAL_ERROR: DAMAGE,
        },
    )
    verify.add_argument(
        "--rebuild",
        action="store_true",
        help="only when the manifest is missing or damaged: re-trust every file as it is now, printing "
        "each (earlier decisions then read as stale until `run` decides again)",
    )
    sql = command(
        warehouse,
        "sql",
        help="run SQL over the warehouse's views (the directory's, or the bucket's current catalogued "
        "objects) and print the answer",
        run=cmd_warehouse_sql,
        exits={
            exit_codes.OK: "answered",
            exit_codes.REFUSED: "the query failed (DuckDB's message)",
            exit_codes.INTERNAL_ERROR: "the warehouse cannot be read, or an internal error",
        },
    )
    sql.add_argument("query", nargs="?", help="the SQL (default: read it from standard input)")
    format_option(sql, "text", "csv", "json")
    sql.add_argument(
        "--remote",
        action="store_true",
        help="on object storage: read the objects straight from the bucket, keeping no local copies",
    )


def internal_error(lines: list[str], advice: str) -> int:
    """Print each line as an internal error, then the advice; the exit code is INTERNAL_ERROR (4)."""
    for line in lines:
        print(f"internal error: {line}", file=sys.stderr)
    print(f"internal error: {advice}", file=sys.stderr)
    return exit_codes.INTERNAL_ERROR


REPAIR = (
    "damaged files were moved aside (never deleted); re-materialize the partition(s) named above "
    "(e.g. `evaltrack run --build BUILD`) to replace them, or restore the manifest named"
)


def cmd_release_status(args: argparse.Namespace) -> int:
    from eval_assets.evidence import DecisionDamaged, check_decision
    from eval_assets.warehouse import WarehouseError, open_warehouse

    build = args.build
    if (problem := id_problem(build)) is not None:
        print(f"release-status: BUILD: {problem}", file=sys.stderr)
        return exit_codes.DECISION["block"]
    try:
        project = project_of(args)
        if (why := missing_home(args)) is not None:
            print(f"build {build}: no decision yet ({why})")
            return exit_codes.DECISION["none"]
        home = home_of(args)
    except ConfigError as exc:  # the project itself does not load: no decision can be verified
        return internal_error([str(p) for p in exc.problems], "fix the project configuration named above")
    try:
        warehouse = open_warehouse(home.warehouse, project.settings.warehouse)
        warehouse.verify()
        damage = [d.text() for d in warehouse.damage(build)]
        if damage:
            return internal_error(damage, REPAIR)
        checked = check_decision(project, home, warehouse, build)
    except TrackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_codes.DECISION["none"]
    except DecisionDamaged as exc:
        return internal_error(list(exc.problems), REPAIR)
    except WarehouseError as exc:  # the partition manifest is missing or damaged
        return internal_error([str(exc)], "nothing was decided from unverified files")
    if checked is None:
        line = f"build {build}: no decision yet (materialize release_decision, e.g. `evaltrack run --build {build}`)"
        print("\n".join(wrapped(line, terminal_width())))
        return exit_codes.DECISION["none"]
    return _print(args, build, checked)


def decision_record(checked: CheckedDecision | None, build: str) -> dict[str, object]:
    """A build's checked decision as plain data (what `--format json` prints)."""
    if checked is None:
        return {"build": build, "decision": "none", "recorded": False, "baseline": None, "reasons": []}
    reasons: list[dict[str, object]] = [
        {
            "severity": "none",
            "source": "release",
            "message": f"the recorded decision ({checked.row['decision']}) "
            f"is stale: {why}; materialize release_decision again",
        }
        for why in checked.stale
    ] or [dict(r) for r in checked.reasons]
    return {
        "build": build,
        "decision": checked.decision,
        "recorded": True,
        "stale": bool(checked.stale),
        "baseline": checked.row.get("baseline") or None,
        "reasons": reasons,
    }


def _print(args: argparse.Namespace, build: str, checked: CheckedDecision) -> int:
    record = decision_record(checked, build)
    decision = str(record["decision"])
    rows = record["reasons"]
    assert isinstance(rows, list)
    if args.format == "json":
        print(json.dumps(record, default=str, sort_keys=True))
    elif args.format == "markdown":
        print(reasons_markdown(build, decision, rows), end="")
    else:
        width = terminal_width()
        print(
            "\n".join(wrapped(f"build {build}: {decision} (baseline: {record['baseline'] or 'none'})", width))
        )
        print(text_table(("severity", "source", "reason"), reasons_text_rows(rows), width, wrap=True))
    return exit_codes.DECISION[decision]


def cmd_warehouse_verify(args: argparse.Namespace) -> int:
    """Re-hash every warehouse file against the partition manifest (damage is an internal error);
    `--rebuild` re-trusts the files as they are when the manifest is missing or damaged, naming each."""
    from eval_assets.warehouse import ManifestHealthy, WarehouseError, open_warehouse

    try:
        why = missing_home(args)
    except ConfigError as exc:
        return internal_error([str(p) for p in exc.problems], "pass --project or --home")
    if why is not None:
        print(f"ok: nothing to verify ({why})")
        return exit_codes.OK
    try:
        warehouse = open_warehouse(home_of(args).warehouse, project_of(args).settings.warehouse)
    except ConfigError as exc:
        return internal_error([str(p) for p in exc.problems], "fix the project configuration named above")
    if args.rebuild:
        try:
            trusted = warehouse.rebuild_manifest()
        except ManifestHealthy as exc:  # then verify as without --rebuild: a stray file is damage
            print(f"warehouse verify --rebuild: {exc}", file=sys.stderr)
        else:
            for rel in trusted:
                print(f"re-trusted: {rel}")
            print(
                f"{len(trusted)} file(s) re-trusted as they are now; {warehouse.manifest_location} rebuilt; "
                "every decision recorded before it reads as stale until `evaltrack run` decides again"
            )
            return exit_codes.OK
    try:
        damage = warehouse.verify(full=True)
    except WarehouseError as exc:
        return internal_error([str(exc)], "see `evaltrack warehouse verify --rebuild`")
    if damage:
        return internal_error([d.text() for d in damage], REPAIR)
    print(f"ok: every file under {warehouse.location} matches {warehouse.manifest_location}")
    return exit_codes.OK


def cmd_warehouse_sql(args: argparse.Namespace) -> int:
    """Answer one SQL query over the views, read from verified files only (`Warehouse.rows`)."""
    import duckdb

    from eval_assets.warehouse import WarehouseError, open_warehouse

    try:
        warehouse = open_warehouse(home_of(args).warehouse, project_of(args).settings.warehouse)
        warehouse.initialise()
    except ConfigError as exc:
        return internal_error([str(p) for p in exc.problems], "fix the project configuration named above")
    except WarehouseError as exc:
        return internal_error([str(exc)], "see `evaltrack warehouse verify`")
    sql = args.query if args.query is not None else sys.stdin.read()
    try:
        if args.remote and hasattr(warehouse, "remote_connection"):
            con = warehouse.remote_connection()
            try:
                cursor = con.execute(sql)
                names = [d[0] for d in cursor.description]
                rows = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
            finally:
                con.close()
        else:
            rows = warehouse.rows(sql)
    except duckdb.Error as exc:
        print(f"warehouse sql: {str(exc).strip().splitlines()[0]}", file=sys.stderr)
        return exit_codes.REFUSED
    except WarehouseError as exc:
        return internal_error([str(exc)], "see `evaltrack warehouse verify`")
    names = list(rows[0]) if rows else []
    if args.format == "json":
        print(json.dumps(rows, default=str, sort_keys=False))
    elif args.format == "csv":
        import csv

        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow(names)
        out.writerows([r[n] for n in names] for r in rows)
    else:
        print(text_table(tuple(names), [[("" if r[n] is None else str(r[n])) for n in names] for r in rows]))
    return exit_codes.OK

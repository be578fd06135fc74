"""`evaltrack bridge run` and `evaltrack trend`: a bridge run between two judge versions and the score
trend of judge versions over the registered builds, each materialized on the persistent Dagster
instance (`calibration_offsets` / `score_trend`, through `eval_assets.cli.orchestrate`), then read
back from the warehouse as text, JSON or markdown (docs/methods.md: bridges, score trend)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from eval_assets import exit_codes
from eval_assets.cli.arguments import Commands, command, format_option, group, id_arg
from eval_assets.cli.common import home_of, print_problems, project_of
from eval_assets.config import ConfigError, Project
from eval_assets.present import text_table

if TYPE_CHECKING:
    from eval_assets.capability.track import Track


def register(sub: Commands) -> None:
    bridge = group(sub, "bridge", help="bridge runs between judge versions")
    run = command(
        bridge,
        "run",
        help="calibrate --to against --from on the same stored outputs",
        run=cmd_bridge_run,
        exits={
            exit_codes.OK: "published",
            # the offset is not usable: a refused command, or a bridge that ran and was not published
            exit_codes.REFUSED: "not published, or refused (an unknown version, no bridge declared between them)",
            exit_codes.INTERNAL_ERROR: "the bridge run failed, or an internal error",
        },
    )
    run.add_argument(
        "--from", dest="from_version", required=True, type=id_arg, help="the older judge version"
    )
    run.add_argument(
        "--to",
        dest="to_version",
        required=True,
        type=id_arg,
        help="the version that declares bridges_from it",
    )
    run.add_argument(
        "--builds",
        nargs="+",
        type=id_arg,
        help="builds to bridge over (default: the judge file's bridge_builds, else the newest 3)",
    )
    format_option(run, "text", "markdown", "json")
    trend = command(
        sub,
        "trend",
        help="draw and print the score trend over the registered builds (splices, intervals, breaks)",
        run=cmd_trend,
        exits={
            exit_codes.OK: "drawn and printed",
            exit_codes.REFUSED: "no judge version or judge of that name",
            exit_codes.INTERNAL_ERROR: "a trend's materialization failed, or an internal error",
        },
    )
    trend.add_argument(
        "--judge", type=id_arg, help="a judge version or judge name (default: every active version)"
    )
    format_option(trend, "text", "markdown", "json")


def _refuse(message: str) -> int:
    print(f"refused: {message}", file=sys.stderr)
    return exit_codes.REFUSED


def _figure(value: Any, places: int = 3) -> str:
    return "" if value is None else f"{float(value):.{places}f}"


def cmd_bridge_run(args: argparse.Namespace) -> int:
    from eval_assets.cli.orchestrate import launch_bridge

    try:
        project = project_of(args)
        home = home_of(args)
    except ConfigError as exc:
        return print_problems(exc)
    for version in (args.from_version, args.to_version):
        if version not in project.judges:
            return _refuse(
                f"unknown judge version {version!r} (judges/: {', '.join(sorted(project.judges))})"
            )
    declared = project.judges[args.to_version].bridges_from
    if declared != args.from_version:
        return _refuse(
            f"{args.to_version} declares bridges_from: {declared or 'nothing'}, not {args.from_version} "
            f"(judges/{project.judges[args.to_version].name}*.yaml)"
        )
    builds = [b for part in (args.builds or []) for b in part.split(",") if b]
    step = launch_bridge(home, args.to_version, builds)
    if not step.success:
        print(f"bridge {args.from_version} -> {args.to_version} failed: {step.error}", file=sys.stderr)
        return exit_codes.INTERNAL_ERROR
    values = dict(step.metadata.get("calibration_offsets", {}))
    values["run_id"] = step.run_id
    published = bool(values.get("published"))
    if args.format == "json":
        print(json.dumps(values, default=str, sort_keys=True))
    else:
        ci = values.get("ci") or [None, None]
        rows = [
            ("published", str(published)),
            ("offset", f"{_figure(values.get('offset'), 4)} {values.get('unit', '')}".strip()),
            ("95% CI", f"[{_figure(ci[0], 4)}, {_figure(ci[1], 4)}]"),
            ("pairs", f"{values.get('n_outputs')} outputs over {values.get('n_scenarios')} scenarios"),
            ("builds", ", ".join(values.get("builds") or [])),
            ("spend", f"${float(values.get('spend_usd') or 0.0):.4f}"),
            *(("reason", str(r)) for r in values.get("reasons") or []),
        ]
        title = f"bridge {args.from_version} -> {args.to_version} (run {step.run_id})"
        if args.format == "markdown":
            body = "\n".join(f"| {k} | {v} |" for k, v in rows)
            print(f"**{title}**\n\n| | |\n| --- | --- |\n{body}")
        else:
            print(title)
            print(text_table(("", ""), rows))
    return exit_codes.OK if published else exit_codes.REFUSED


def _trend_versions(project: Project, judge: str | None) -> list[str]:
    """`judge` as a version id, or every version of the judge named so; default: every active version."""
    if judge is None:
        return [j.version_id for j in project.active_judges]
    if judge in project.judges:
        return [judge]
    return sorted(v for v, j in project.judges.items() if j.name == judge)


POINT_COLUMNS = (
    "position",
    "build",
    "status",
    "mean_score",
    "score_low",
    "score_high",
    "source_version",
    "bridges",
    "reason",
)


def trend_points(track: Track, versions: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """The `score_trend_points` rows of each version, in registration order (`position`)."""
    frame = track.warehouse.query(
        f"SELECT trend_version, {', '.join(POINT_COLUMNS)} FROM score_trend_points "
        "WHERE list_contains(?, trend_version) ORDER BY trend_version, position",
        [list(versions)],
    )
    out: dict[str, list[dict[str, Any]]] = {v: [] for v in versions}
    for rec in frame.to_dict("records"):
        row = {k: (None if not isinstance(v, str) and v != v else v) for k, v in rec.items()}  # NaN -> None
        out[str(row.pop("trend_version"))].append(row)
    return out


def cmd_trend(args: argparse.Namespace) -> int:
    from eval_assets.capability.track import Track
    from eval_assets.cli.orchestrate import launch_trends

    try:
        project = project_of(args)
        home = home_of(args)
        track = Track(project, home)
    except ConfigError as exc:
        return print_problems(exc)
    versions = _trend_versions(project, args.judge)
    if not versions:
        return _refuse(f"no judge version or judge named {args.judge!r}")
    steps = launch_trends(home, versions)
    failed = [s for s in steps if not s.success]
    for s in failed:
        print(f"score trend {s.partition} failed: {s.error}", file=sys.stderr)
    if failed:
        return exit_codes.INTERNAL_ERROR
    points = trend_points(track, versions)
    plots = {s.partition: s.metadata.get("score_trend", {}).get("plot_file") for s in steps}
    if args.format == "json":
        print(json.dumps({v: {"points": points[v], "plot_file": plots[v]} for v in versions}, default=str))
        return exit_codes.OK
    for version in versions:
        rows = [
            (
                str(p["position"]),
                str(p["build"]),
                str(p["status"]),
                _figure(p["mean_score"]),
                "" if p["score_low"] is None else f"[{_figure(p['score_low'])}, {_figure(p['score_high'])}]",
                str(p["source_version"] or ""),
                str(p["bridges"] or 0),
                str(p["reason"] or ""),
            )
            for p in points[version]
        ]
        head = ("#", "build", "point", "mean score", "interval", "scored by", "bridges", "note")
        if args.format == "markdown":
            lines = ["| " + " | ".join(r) + " |" for r in rows]
            print(f"**Score trend under {version}** (builds in registration order)\n")
            print("| " + " | ".join(head) + " |\n|" + " --- |" * len(head))
            print("\n".join(lines) + "\n")
        else:
            print(f"score trend under {version} (builds in registration order; plot: {plots[version]})")
            print(text_table(head, rows))
    return exit_codes.OK

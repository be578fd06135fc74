"""Automation over judge versions, through Dagster's own condition evaluation and materializations:
only the judge versions that apply to a build are materialized, and one that fails never leaves the
release decision waiting: it is decided `none`, naming the failed evidence."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import duckdb
import yaml

from eval_assets.capability.track import Track
from eval_assets.cli.orchestrate import instance_for
from eval_assets.config import Project
from eval_assets.definitions import location
from eval_assets.home import EvalHome

HELP, SAFETY = "helpfulness-v1", "safety-v1"
PER_JUDGE = ["judge_verdicts", "cost_ledger", "noise_bands", "capability_report"]


def _build(project: Project, track: Track, tmp_path: Path, build_id: str, judges: list[str]) -> str:
    manifest = yaml.safe_load((project.root / "examples" / "builds" / "baseline.yaml").read_text())
    manifest |= {"id": build_id, "judges": judges}
    path = tmp_path / f"{build_id}.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return track.register_build(path).id


def _requested(result: dg.EvaluateAutomationConditionsResult, asset: str) -> set[str]:
    return {str(k) for k in result.get_requested_partitions(dg.AssetKey(asset))}


def test_automation_materializes_only_the_judge_versions_a_build_lists(
    project: Project, home: EvalHome
) -> None:
    track = Track(project, home)
    only_help = _build(project, track, home.root.parent, "b-only-help", [HELP])
    every = _build(project, track, home.root.parent, "b-every", [HELP, SAFETY])
    instance = instance_for(home)
    instance.add_dynamic_partitions("build", [only_help, every])
    defs = location(project, home)
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    assert result.total_requested == 0
    for build in (only_help, every):  # the subject runs landed (a runless event is enough to trigger)
        instance.report_runless_asset_event(dg.AssetMaterialization("scenario_runs", partition=build))

    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=result.cursor)
    assert _requested(result, "judge_verdicts") == {
        f"{only_help}|{HELP}",
        f"{every}|{HELP}",
        f"{every}|{SAFETY}",
    }


def _hold_elsewhere(track: Track, build: str, judge_version: str) -> None:
    """Another run on another host holds judge_verdicts [build|judge_version]: this one is refused."""
    grant = track.journal.acquire_lease(
        build,
        "judge_verdicts",
        f"{build}|{judge_version}",
        holder="other-host:1:other-run",
        host="other-host",
        pid=1,
        run_id="other-run",
        ttl_s=3600,
        now=datetime.now(UTC),
    )
    assert grant.granted


def test_a_failed_judge_version_makes_the_decision_none_naming_it_instead_of_waiting(
    project: Project, home: EvalHome, tmp_path: Path
) -> None:
    track = Track(project, home)
    build = _build(project, track, tmp_path, "b-half-judged", [HELP, SAFETY])
    _hold_elsewhere(track, build, SAFETY)
    instance = instance_for(home)
    instance.add_dynamic_partitions("build", [build])
    defs = location(project, home)
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance)

    def materialize(assets: list[str], key: str | dg.MultiPartitionKey) -> bool:
        return dg.materialize(
            [defs.resolve_assets_def(a) for a in assets],
            instance=instance,
            partition_key=key,
            raise_on_error=False,
        ).success

    assert materialize(["scenario_runs", "deterministic_suite"], build)
    key = {jv: dg.MultiPartitionKey({"build": build, "judge_version": jv}) for jv in (HELP, SAFETY)}
    assert materialize(PER_JUDGE, key[HELP])

    # safety-v1 has not run yet: the decision waits for it
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=result.cursor)
    assert _requested(result, "release_decision") == set()
    assert _requested(result, "judge_verdicts") == {str(key[SAFETY])}

    assert not materialize(["judge_verdicts"], key[SAFETY])  # refused: another run holds its lease
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=result.cursor)
    assert _requested(result, "release_decision") == {build}  # failed evidence is settled evidence

    assert materialize(["release_decision"], build)
    con = duckdb.connect(str(home.warehouse / "warehouse.duckdb"), read_only=True)
    try:
        decision = con.execute("SELECT decision FROM release_decisions WHERE build = ?", [build]).fetchone()
        reasons = [
            r[0]
            for r in con.execute(
                "SELECT message FROM release_decision_reasons WHERE build = ? AND severity = 'none'", [build]
            ).fetchall()
        ]
    finally:
        con.close()
    assert decision == ("none",)
    assert f"judge version {SAFETY} of build {build} failed: its latest judge_verdicts run failed" in reasons

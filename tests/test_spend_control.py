"""Spend control through the track: ceilings exclude (never zero), bad spend config fails before paying."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from eval_assets.capability.materialize import (
    materialize_cost_ledger,
    materialize_judge_verdicts,
    materialize_scenario_runs,
)
from eval_assets.capability.track import Track
from eval_assets.cli import main
from eval_assets.config import ConfigError, load_project
from eval_assets.home import EvalHome

ROOT = Path(__file__).resolve().parents[1]


def _project(tmp_path: Path, **spend: object) -> Path:
    dest = tmp_path / "project"
    for sub in ("scenarios", "rubrics", "judges", "examples"):
        shutil.copytree(ROOT / sub, dest / sub)
    settings = yaml.safe_load((ROOT / "evaltrack.yaml").read_text())
    settings["spend"] = {**settings.get("spend", {}), **spend}
    (dest / "evaltrack.yaml").write_text(yaml.safe_dump(settings))
    return dest


def test_negative_or_non_numeric_ceiling_is_refused_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as neg:
        load_project(_project(tmp_path / "a", day_ceiling_usd=-1))
    assert "evaltrack.yaml: spend.day_ceiling_usd: Input should be greater than or equal to 0" in str(
        neg.value
    )
    with pytest.raises(ConfigError) as text:
        load_project(_project(tmp_path / "b", suite_ceiling_usd="lots"))
    assert "evaltrack.yaml: spend.suite_ceiling_usd:" in str(text.value)


def test_zero_ceiling_runs_nothing_and_excludes_every_scenario_never_scoring_zero(
    tmp_path: Path, home: EvalHome
) -> None:
    track = Track(load_project(_project(tmp_path, suite_ceiling_usd=0)), home)
    build = track.register_build(track.project.root / "examples/builds/baseline.yaml")
    runs = materialize_scenario_runs(track, build.id, "run-zero")
    assert runs["excluded"] == runs["attempts"] > 0 and runs["ok"] == 0
    assert runs["spend_usd"] == 0
    verdicts = materialize_judge_verdicts(track, build.id, "helpfulness-v1", "run-zero")
    assert verdicts["excluded"] == verdicts["verdicts"] and verdicts["scored"] == 0
    frame = track.warehouse.query("SELECT status, score, failure_reason FROM judge_verdicts")
    assert set(frame["status"]) == {"excluded"} and frame["score"].isna().all()
    assert frame["failure_reason"].str.contains("suite ceiling").all()
    refused = [r for r in track.journal.rows() if r.status == "refused"]
    assert refused and {r.ceiling for r in refused} == {"suite"}
    assert not [r for r in track.journal.rows() if r.status in ("settled", "reserved")]


def test_scenario_ceiling_excludes_that_scenario_whole_and_reports_the_rate(
    tmp_path: Path, home: EvalHome
) -> None:
    project = _project(tmp_path)
    target = next((project / "scenarios").rglob("coding.fix-off-by-one.yaml"))
    target.write_text(target.read_text() + "ceiling_usd: 0.01\n")
    track = Track(load_project(project), home)
    build = track.register_build(project / "examples/builds/baseline.yaml")
    runs = materialize_scenario_runs(track, build.id, "run-1")
    assert "coding.fix-off-by-one" in runs["excluded_scenarios"]
    frame = track.warehouse.query(
        "SELECT status, excluded_reason FROM scenario_runs WHERE scenario_id = 'coding.fix-off-by-one'"
    )
    assert set(frame["status"]) == {"excluded"}
    assert frame["excluded_reason"].str.contains("scenario ceiling").all()
    materialize_judge_verdicts(track, build.id, "helpfulness-v1", "run-1")
    materialize_cost_ledger(track, build.id, "helpfulness-v1", "run-1")
    rates = track.warehouse.query("SELECT * FROM exclusions WHERE judge_version = 'helpfulness-v1'")
    assert rates["excluded_scenarios"].iloc[0] >= 1 and 0 < rates["exclusion_rate"].iloc[0] < 1
    hits = track.warehouse.query("SELECT refused, hit_rate, ceilings FROM ceiling_hits_daily")
    assert hits["refused"].iloc[0] >= 1 and list(hits["ceilings"].iloc[0]) == ["scenario"]
    # a settled or failed call's seconds are recorded; a refused one never ran
    timed = track.warehouse.query(
        "SELECT status, count(*) AS n, count(call_s) AS timed, min(call_s) AS fastest FROM cost_ledger GROUP BY 1"
    ).set_index("status")
    assert timed.loc["settled", "timed"] == timed.loc["settled", "n"] and timed.loc["settled", "fastest"] >= 0
    assert timed.loc["refused", "timed"] == 0


def test_unreachable_journal_url_fails_before_any_model_call(
    tmp_path: Path, home: EvalHome, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path, journal_url="postgresql+psycopg://nobody@127.0.0.1:9/none?connect_timeout=2")
    assert (
        main(["--project", str(project), "build", "add", str(project / "examples/builds/baseline.yaml")]) == 0
    )
    assert main(["--project", str(project), "run", "--build", "agent-2026-11-28-base"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach the journal" in err
    assert not (home.warehouse / "data" / "scenario_runs" / "build=agent-2026-11-28-base").exists()

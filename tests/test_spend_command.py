"""`evaltrack spend`: the journal's running totals, spent and in flight, beside the ceiling of each scope."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from test_contract_spend_journal import NOW, reserve, settle

from eval_assets.capability.track import Track
from eval_assets.cli import main
from eval_assets.config import load_project
from eval_assets.home import EvalHome
from eval_assets.spend import AttemptKey, journal_file, journal_url, open_journal

ROOT = Path(__file__).resolve().parents[1]
LOW = "support.shipping-delay"  # the shipped scenario with its own, lower ceiling_usd


def _pay(home: EvalHome) -> None:
    """Build b1: two settled subject calls ($0.25 + $0.5) and one in flight (worst case $1); build b2: one
    settled judge call ($0.125)."""
    with open_journal(journal_url(home.root)) as journal:
        for key, cost in (
            (AttemptKey("b1", None, LOW, 0, "subject", 1), 0.25),
            (AttemptKey("b1", None, "coding.fix-off-by-one", 0, "subject", 1), 0.5),
            (AttemptKey("b2", "helpfulness-v1", LOW, 0, "judge", 1), 0.125),
            (AttemptKey("b1", None, LOW, 1, "subject", 1), None),
        ):
            reserve(journal, key, worst_usd=1.0)
            if cost is not None:
                settle(journal, key, cost)


def _scopes(capsys: pytest.CaptureFixture[str], *args: str) -> dict[tuple[str, str], dict[str, object]]:
    assert main(["spend", "--day", NOW.date().isoformat(), "--format", "json", *args]) == 0
    out = json.loads(capsys.readouterr().out)
    return {(s["scope"], s["key"]): s for s in out["scopes"]}


def test_spend_shows_spent_and_in_flight_per_scope_against_the_ceiling_that_applies(
    home: EvalHome, capsys: pytest.CaptureFixture[str]
) -> None:
    _pay(home)
    spend = load_project(ROOT).settings.spend
    scopes = _scopes(capsys)
    day = scopes[("day", NOW.date().isoformat())]
    assert (day["spent_usd"], day["in_flight_usd"], day["ceiling_usd"]) == (0.875, 1.0, spend.day_ceiling_usd)
    assert day["used"] == pytest.approx(1.875 / spend.day_ceiling_usd)
    b1 = scopes[("suite", "b1/-/0")]
    assert (b1["spent_usd"], b1["in_flight_usd"], b1["ceiling_usd"]) == (0.75, 1.0, spend.suite_ceiling_usd)
    assert ("suite", "b2/helpfulness-v1/0") in scopes
    assert not [k for k in scopes if k[0] == "scenario"]  # scenarios only for a named build

    only_b1 = _scopes(capsys, "--build", "b1")
    assert [k for k in only_b1 if k[0] == "suite"] == [("suite", "b1/-/0")]
    low, other = only_b1[("scenario", f"b1/-/{LOW}/0")], only_b1[("scenario", "b1/-/coding.fix-off-by-one/0")]
    assert (low["spent_usd"], low["in_flight_usd"]) == (0.25, 1.0)
    assert low["ceiling_usd"] == load_project(ROOT).scenarios[LOW].ceiling_usd  # its own, not the default
    assert other["ceiling_usd"] == spend.scenario_ceiling_usd

    other_day = _scopes(capsys)  # the same journal read for the day the rows were not reserved on
    assert main(["spend", "--day", "2026-12-01", "--format", "json"]) == 0
    day5 = json.loads(capsys.readouterr().out)["scopes"][0]
    assert (day5["key"], day5["spent_usd"], day5["in_flight_usd"]) == ("2026-12-01", 0.0, 0.0)
    assert other_day == scopes


def test_spend_in_text_names_each_scope_in_one_line(
    home: EvalHome, capsys: pytest.CaptureFixture[str]
) -> None:
    _pay(home)
    assert main(["spend", "--day", NOW.date().isoformat(), "--build", "b1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["scope", "key", "spent", "in", "flight", "ceiling", "used"]
    assert lines[2].split()[:4] == ["day", NOW.date().isoformat(), "$0.8750", "$1.0000"]
    assert [line.split()[0] for line in lines[3:]] == ["suite", "scenario", "scenario"]


def test_spend_on_a_home_that_never_paid_creates_no_journal(
    home: EvalHome, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["spend"]) == 0
    assert "no spend recorded" in capsys.readouterr().out
    assert not (home.root / "journal.sqlite").exists()


@pytest.mark.parametrize("form", ["default", "sqlite:///", "sqlite+pysqlite:///"])
def test_the_spend_command_and_the_track_read_one_journal_file_from_every_url_form(
    form: str, home: EvalHome, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`evaltrack spend` and `Track` find the journal through one rule (`spend.journal_url`): from the
    default under EVAL_HOME, a `sqlite:///` URL and one naming its driver, the command names the file the
    track then opens, creating none itself, and reads what the track's journal holds."""
    project = tmp_path / "project"
    shutil.copytree(ROOT, project, ignore=shutil.ignore_patterns(".*", "tests", "benchmarks", "docs"))
    journal = home.root / "journal.sqlite"
    if form != "default":
        settings = yaml.safe_load((project / "evaltrack.yaml").read_text())
        journal = tmp_path / "elsewhere" / "journal.sqlite"
        settings.setdefault("spend", {})["journal_url"] = f"{form}{journal}"
        (project / "evaltrack.yaml").write_text(yaml.safe_dump(settings))
    assert main(["--project", str(project), "spend"]) == 0
    assert f"no journal at {journal}" in capsys.readouterr().out
    assert not journal.exists()

    track = Track(load_project(project), home)
    assert journal_file(track.journal_url) == journal
    key = AttemptKey("b1", None, LOW, 0, "subject", 1)
    reserve(track.journal, key, worst_usd=1.0)
    settle(track.journal, key, 0.25)
    track.journal.close()
    assert journal.exists()
    assert (
        main(["--project", str(project), "spend", "--day", NOW.date().isoformat(), "--format", "json"]) == 0
    )
    day = json.loads(capsys.readouterr().out)["scopes"][0]
    assert (day["spent_usd"], day["in_flight_usd"]) == (0.25, 0.0)


def test_a_journal_url_is_a_sqlite_file_by_its_backend_whatever_driver_it_names(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    assert journal_url(tmp_path) == f"sqlite:///{tmp_path / 'journal.sqlite'}"
    assert journal_url(tmp_path, "sqlite:///x") == "sqlite:///x"
    assert journal_url(tmp_path, "sqlite:///x", "sqlite:///y") == "sqlite:///y"
    assert journal_file(f"sqlite:///{path}") == journal_file(f"sqlite+pysqlite:///{path}") == path
    for other in ("postgresql+psycopg://u@127.0.0.1:5432/db", "sqlite://", "sqlite:///:memory:", "not a url"):
        assert journal_file(other) is None, other


def test_spend_on_an_unreadable_journal_exits_4_naming_it(
    home: EvalHome, capsys: pytest.CaptureFixture[str]
) -> None:
    (home.root / "journal.sqlite").write_bytes(b"not a database at all" * 100)
    assert main(["spend"]) == 4
    err = capsys.readouterr().err
    assert "journal.sqlite" in err and len(err.strip().splitlines()) <= 2

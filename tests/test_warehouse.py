"""The warehouse: atomic partitions, history kept, analysts never blocked and never see a mix."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from shared import full_row

from eval_assets.capability.materialize import materialize_scenario_runs
from eval_assets.capability.track import Track
from eval_assets.config import Project
from eval_assets.home import EvalHome
from eval_assets.warehouse import DATASETS, Dataset, Warehouse, WarehouseError, run_varying

HERE = Path(__file__).parent


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"reader exited early: {proc.stderr.read() if proc.stderr else ''}"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)  # polling for a file the other process writes, not waiting out a race


def test_newest_file_per_partition_is_current_and_history_keeps_all(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    wh.initialise()
    row = {
        "scenario_id": "s",
        "repeat": 1,
        "status": "ok",
        "output": "old",
        "policy_failures": 0,
        "cost_usd": 0.1,
    }
    row = full_row("scenario_runs", row)
    wh.write_partition("scenario_runs", {"build": "b"}, [row, dict(row, repeat=2)], "run-1")
    wh.write_partition("scenario_runs", {"build": "b"}, [dict(row, output="new")], "run-2")
    wh.write_partition("scenario_runs", {"build": "other"}, [row], "run-3")
    con = duckdb.connect(str(wh.catalog_path), read_only=True)
    current = con.execute("SELECT build, output, run_id FROM scenario_runs ORDER BY build").fetchall()
    history = con.execute("SELECT count(*) FROM scenario_runs_history").fetchone()
    con.close()
    assert current == [("b", "new", "run-2"), ("other", "old", "run-3")]
    assert history == (4,)


def test_rows_answers_as_query_does_with_python_values_and_none_for_null(tmp_path: Path) -> None:
    """`Warehouse.rows`: the same rows, in the same order, as `query`'s frame, each a dict of plain
    Python values; a NULL (an output the subject never gave) is None, not NaN."""
    wh = Warehouse(tmp_path / "wh")
    wh.initialise()
    row = full_row(
        "scenario_runs",
        {
            "scenario_id": "s",
            "repeat": 1,
            "status": "ok",
            "output": "x",
            "policy_failures": 0,
            "cost_usd": 0.1,
        },
    )
    wh.write_partition("scenario_runs", {"build": "b"}, [dict(row, repeat=2, output=None), row], "run-1")
    sql = "SELECT scenario_id, repeat, output, cost_usd FROM scenario_runs WHERE build = ? ORDER BY repeat"
    rows = wh.rows(sql, ["b"])
    assert rows == [
        {"scenario_id": "s", "repeat": 1, "output": "x", "cost_usd": 0.1},
        {"scenario_id": "s", "repeat": 2, "output": None, "cost_usd": 0.1},
    ]
    assert [type(r["repeat"]) for r in rows] == [int, int]
    frame = wh.query(sql, ["b"])
    assert [r["repeat"] for r in rows] == frame["repeat"].tolist()
    assert rows[0]["output"] == frame["output"][0]


def test_views_resolve_from_any_working_directory(tmp_path: Path, monkeypatch) -> None:
    wh = Warehouse(tmp_path / "wh")
    wh.initialise()
    monkeypatch.chdir("/")
    con = duckdb.connect(str(wh.catalog_path), read_only=True)
    assert con.execute("SELECT count(*) FROM judge_verdicts").fetchone() == (0,)
    con.close()


PROBE = Dataset("probe", ("build",), (("build", "VARCHAR"), ("n", "INTEGER"), ("text", "VARCHAR")))


def _parquet_files(root: Path) -> list[str]:
    """What a reader's glob (`**/*.parquet`) matches under `root`."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.parquet"))


def test_a_partition_file_appears_only_by_rename_of_a_complete_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic atomicity, seen from inside the one rename (os.replace or os.rename, observed, then
    done for real): the final name does not exist yet, no reader's glob matches anything, and the file
    being renamed already holds every row. A writer that wrote to the final name would fail this."""
    wh = Warehouse(tmp_path / "wh", {"probe": PROBE})
    rows = [{"build": "b1", "n": i, "text": f"row {i}"} for i in range(50)]
    renames: list[dict[str, object]] = []
    real_replace = os.replace

    def observed_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        src_path, dst_path = Path(src), Path(dst)
        con = duckdb.connect()
        try:
            count = con.execute("SELECT count(*) FROM read_parquet(?)", [str(src_path)]).fetchone()
        finally:
            con.close()
        renames.append(
            {
                "dst": dst_path,
                "dst_existed": dst_path.exists(),
                "visible": _parquet_files(wh.data),
                "rows_in_src": count,
            }
        )
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", observed_replace)
    monkeypatch.setattr(os, "rename", observed_replace)  # Path.rename/replace go through these too
    path = wh.write_partition("probe", {"build": "b1"}, rows, "run-1")

    assert renames == [{"dst": path, "dst_existed": False, "visible": [], "rows_in_src": (50,)}]
    assert _parquet_files(wh.data) == [str(path.relative_to(wh.data))]
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temp file left behind


def test_a_failed_write_leaves_no_file_at_all(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh", {"probe": PROBE})
    with pytest.raises(WarehouseError, match=r"^probe: could not write \d+-run-1\.parquet: "):
        wh.write_partition(
            "probe", {"build": "b1"}, [{"build": "b1", "n": "not a number", "text": None}], "run-1"
        )
    assert [p for p in (wh.data / "probe").rglob("*") if p.is_file()] == []


def test_analyst_reading_during_materialization_sees_old_or_new_never_a_mix(
    project: Project, home: EvalHome, tmp_path: Path
) -> None:
    track = Track(project, home)
    build = track.register_build(project.root / "examples" / "builds" / "baseline.yaml")
    first = materialize_scenario_runs(track, build.id, "run-a")
    work = tmp_path / "analyst"
    work.mkdir()
    reader = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "analyst_reader.py"),
            str(track.warehouse.catalog_path),
            build.id,
            str(work),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(work / "ready", reader)
        second = materialize_scenario_runs(track, build.id, "run-b")  # must not be blocked by the open reader
        third = materialize_scenario_runs(track, build.id, "run-c")
        (work / "stop").write_text("")
        assert reader.wait(timeout=60) == 0, reader.stderr.read() if reader.stderr else ""
    finally:
        if reader.poll() is None:
            reader.kill()
    result = json.loads((work / "observations.json").read_text())
    assert result["errors"] == []
    seen = result["observations"]  # how many polls fit between the writes is up to the scheduler
    for obs in seen:
        assert len(obs["run_ids"]) == 1, f"a mix of runs in one read: {obs}"
        assert obs["rows"] == first["attempts"]
    assert seen[-1]["run_ids"] == ["run-c"]  # the reader sees the newest partition without reconnecting
    assert second["attempts"] == third["attempts"] == first["attempts"]


def test_spliced_trend_applies_the_published_offset_and_marks_spliced_points(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    wh.initialise()

    def verdicts(build: str, version: str, scores: list[float]) -> None:
        rows = [
            full_row(
                "judge_verdicts",
                {"scenario_id": f"s{i}", "repeat": 1, "status": "scored", "score": x, "source": "model"},
            )
            for i, x in enumerate(scores)
        ]
        wh.write_partition(
            "judge_verdicts", {"build": build, "judge_version": version}, rows, f"run-{build}-{version}"
        )

    verdicts("old-build", "j-v1", [0.5, 0.5])
    verdicts("new-build", "j-v1", [0.5, 0.5])
    verdicts("new-build", "j-v2", [0.6, 0.6])
    calibration = {
        "judge_from": "j-v1",
        "judge_to": "j-v2",
        "published": True,
        "offset_points": 0.3,
        "scale_low": 1.0,
        "scale_high": 5.0,
    }
    wh.write_partition(
        "calibration_offsets", {"judge_to": "j-v2"}, [full_row("calibration_offsets", calibration)], "bridge"
    )
    con = duckdb.connect(str(wh.catalog_path), read_only=True)
    rows = con.execute(
        "SELECT build, mean_score, spliced, spliced_from FROM score_trend_spliced WHERE trend_version = 'j-v2' "
        "ORDER BY build"
    ).fetchall()
    con.close()
    assert rows[0][0] == "new-build" and rows[0][2] is False  # scored natively: never spliced
    assert rows[1][0] == "old-build" and rows[1][2] is True and rows[1][3] == "j-v1"
    assert abs(rows[1][1] - (0.5 + 0.3 / 4.0)) < 1e-12  # 0.3 rubric points on a 1..5 scale

    # the bridge run again, not published: old-build is a break on j-v2's trend, with no value
    unpublished = {**calibration, "published": False}
    wh.write_partition(
        "calibration_offsets",
        {"judge_to": "j-v2"},
        [full_row("calibration_offsets", unpublished)],
        "bridge-2",
    )
    con = duckdb.connect(str(wh.catalog_path), read_only=True)
    rows = con.execute(
        "SELECT build, mean_score, spliced, is_break FROM score_trend_spliced WHERE trend_version = 'j-v2' "
        "ORDER BY build"
    ).fetchall()
    con.close()
    assert rows == [("new-build", 0.6, False, False), ("old-build", None, False, True)]


# --- damage (issue 11): detected, named, moved aside, never deleted; the rest reads on -----------


def _verdicts(wh: Warehouse, build: str, score: float, run_id: str) -> Path:
    row = full_row("judge_verdicts", {"scenario_id": "s", "repeat": 1, "status": "scored", "score": score})
    return wh.write_partition("judge_verdicts", {"build": build, "judge_version": "j-v1"}, [row], run_id)


def test_a_truncated_file_is_quarantined_named_and_its_partition_is_empty_not_stale(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    wh.initialise()
    _verdicts(wh, "a", 0.1, "old")
    newest = _verdicts(wh, "a", 0.2, "new")
    _verdicts(wh, "b", 0.5, "other")
    original = newest.read_bytes()
    with newest.open("r+b") as f:
        f.truncate(100)
    frame = wh.query("SELECT build, score FROM judge_verdicts ORDER BY build")
    assert frame.values.tolist() == [["b", 0.5]]  # a's older file never passes for current
    [damage] = wh.damage("a")
    assert damage.table == "judge_verdicts" and damage.build == "a"
    assert damage.file == newest.relative_to(wh.data).as_posix()
    assert "size is 100 bytes" in damage.reason
    assert damage.moved_to is not None and Path(damage.moved_to).read_bytes() == original[:100]
    assert not newest.exists() and wh.damage("b") == []
    con = duckdb.connect(str(wh.catalog_path), read_only=True)  # the analyst's catalog reads on too
    assert con.execute("SELECT count(*) FROM judge_verdicts_history").fetchone() == (2,)
    con.close()
    _verdicts(wh, "a", 0.3, "rerun")  # a newer file of the partition resolves the damage
    assert wh.damage("a") == [] and [d.resolved for d in wh.damage("a", include_resolved=True)] == [True]
    assert wh.query("SELECT score FROM judge_verdicts WHERE build = 'a'")["score"].tolist() == [0.3]


def test_a_deleted_file_is_noticed_and_recorded_not_silently_ignored(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    wh.initialise()
    _verdicts(wh, "a", 0.1, "old")
    path = _verdicts(wh, "a", 0.2, "new")
    path.unlink()
    assert wh.query("SELECT count(*) AS n FROM judge_verdicts")["n"].tolist() == [0]
    [damage] = wh.damage("a")
    assert damage.reason == "missing: the file was deleted" and damage.moved_to is None
    notes = list((wh.quarantine / "notes").glob("*.json"))
    assert len(notes) == 1 and json.loads(notes[0].read_text())["table"] == "judge_verdicts"


def test_same_size_corruption_and_foreign_files_are_quarantined(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    wh.initialise()
    path = _verdicts(wh, "a", 0.1, "r1")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    foreign = wh.data / "judge_verdicts" / "build=c" / "judge_version=j-v1" / "1-x.parquet"
    foreign.parent.mkdir(parents=True)
    foreign.write_bytes(b"PAR1 not really")
    found = {d.file: d.reason for d in wh.verify()}
    assert found[path.relative_to(wh.data).as_posix()].startswith("content changed")
    assert found[foreign.relative_to(wh.data).as_posix()].startswith("not written by the partition writer")
    assert wh.query("SELECT count(*) AS n FROM judge_verdicts")["n"].tolist() == [0]


def test_the_written_file_carries_its_run_id_and_write_time_and_a_quote_in_the_path_is_safe(
    tmp_path: Path,
) -> None:
    wh = Warehouse(tmp_path / "it's here", {"probe": PROBE})
    frame = pd.DataFrame([{"build": "b1", "n": 1, "text": "a"}, {"build": "b1", "n": 2, "text": "b"}])
    path = wh.write_partition("probe", {"build": "b1"}, frame, "run-7")
    written_ns = int(path.name.split("-", 1)[0])
    assert path.name == f"{written_ns}-run-7.parquet" and path.parent.name == "build=b1"
    con = duckdb.connect()
    try:
        rows = con.execute(
            "SELECT build, n, text, run_id, epoch_us(written_at) FROM read_parquet(?) ORDER BY n", [str(path)]
        ).fetchall()
    finally:
        con.close()
    assert [r[:4] for r in rows] == [("b1", 1, "a", "run-7"), ("b1", 2, "b", "run-7")]
    assert all(abs(r[4] * 1000 - written_ns) <= 1000 for r in rows)  # TIMESTAMP keeps microseconds


def test_a_write_outside_the_dataset_contract_is_refused_naming_it(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh", {"probe": PROBE})
    row = {"build": "b1", "n": 1, "text": "a"}
    with pytest.raises(WarehouseError) as raised:
        wh.write_partition("probe", {"run": "b1"}, [row], "r")
    assert str(raised.value) == "probe: partition must be ('build',), got ('run',)"
    with pytest.raises(WarehouseError) as raised:
        wh.write_partition("probe", {"build": "b1"}, [dict(row, extra=1, more=2)], "r")
    assert str(raised.value) == "probe: unknown columns ['extra', 'more']"
    with pytest.raises(WarehouseError) as raised:
        wh.write_partition("probe", {"build": "b1"}, [row, dict(row, build="b2")], "r")
    assert str(raised.value) == "probe: rows outside partition build=b1"
    assert not (wh.data / "probe").exists() or not list((wh.data / "probe").rglob("*.parquet"))


@pytest.mark.parametrize("dataset", sorted(DATASETS))
def test_every_table_refuses_a_row_missing_a_column_or_carrying_one_it_does_not_have(
    tmp_path: Path, dataset: str
) -> None:
    wh = Warehouse(tmp_path / "wh")
    wh.initialise()
    ds = DATASETS[dataset]
    partition = {k: "p" for k in ds.partition_by}
    row = full_row(dataset, {})
    last = [c for c, _ in ds.columns if c not in ds.partition_by][-1]
    files = sorted(wh.data.rglob("*.parquet"))
    with pytest.raises(WarehouseError) as raised:
        wh.write_partition(dataset, partition, [row, {k: v for k, v in row.items() if k != last}], "r")
    assert str(raised.value) == f"{dataset}: missing columns [{last!r}]"
    with pytest.raises(WarehouseError) as raised:
        wh.write_partition(dataset, partition, [dict(row, not_a_column=1)], "r")
    assert str(raised.value) == f"{dataset}: unknown columns ['not_a_column']"
    assert sorted(wh.data.rglob("*.parquet")) == files  # nothing written
    assert wh.write_partition(dataset, partition, [row], "r").exists()  # every column given: written


def test_a_row_missing_a_column_or_carrying_an_extra_one_is_refused_never_written_as_null(
    tmp_path: Path,
) -> None:
    wh = Warehouse(tmp_path / "wh", {"probe": PROBE})
    row = {"build": "b1", "n": 1, "text": "a"}
    with pytest.raises(WarehouseError) as raised:  # one row of two forgot `text`
        wh.write_partition("probe", {"build": "b1"}, [row, {"build": "b1", "n": 2}], "r")
    assert str(raised.value) == "probe: missing columns ['text']"
    with pytest.raises(WarehouseError) as raised:  # a frame without `n`
        wh.write_partition("probe", {"build": "b1"}, pd.DataFrame([{"build": "b1", "text": "a"}]), "r")
    assert str(raised.value) == "probe: missing columns ['n']"
    with pytest.raises(WarehouseError) as raised:  # a column the table does not have
        wh.write_partition("probe", {"build": "b1"}, [row, dict(row, n=2, note="x")], "r")
    assert str(raised.value) == "probe: unknown columns ['note']"
    assert not (wh.data / "probe").exists() or not list((wh.data / "probe").rglob("*.parquet"))
    # the partition's key may be left to the partition; an empty partition has no rows to check
    path = wh.write_partition("probe", {"build": "b1"}, [{"n": 1, "text": "a"}], "r")
    con = duckdb.connect()
    try:
        assert con.execute("SELECT build, n, text FROM read_parquet(?)", [str(path)]).fetchall() == [
            ("b1", 1, "a")
        ]
    finally:
        con.close()
    assert wh.write_partition("probe", {"build": "b2"}, [], "r2").exists() and path.exists()


def _spoil_footer(path: Path) -> None:
    """Damage the Parquet footer length so the file is no longer Parquet, keeping its size and mtime."""
    before = path.stat()
    data = bytearray(path.read_bytes())
    data[-6] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_file_duckdb_cannot_read_is_quarantined_even_with_its_size_and_mtime_kept(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    wh.initialise()
    path = _verdicts(wh, "a", 0.1, "r1")
    _verdicts(wh, "b", 0.5, "r2")
    _spoil_footer(path)
    assert wh.query("SELECT build FROM judge_verdicts")["build"].tolist() == ["b"]
    [damage] = wh.damage("a")
    assert damage.reason.startswith("unreadable:") and damage.file.endswith(path.name)


def test_reads_after_the_views_are_defined_see_new_files_and_catch_damage_done_since(tmp_path: Path) -> None:
    """A process defines the views once and reuses them: each read still binds the files as they are
    then (a partition written since is read; a file damaged since, size and mtime kept, is caught)."""
    wh = Warehouse(tmp_path / "wh")
    wh.initialise()
    path = _verdicts(wh, "a", 0.1, "r1")
    assert wh.query("SELECT build FROM judge_verdicts")["build"].tolist() == ["a"]  # views defined
    _verdicts(wh, "b", 0.5, "r2")
    assert sorted(wh.query("SELECT build FROM judge_verdicts")["build"].tolist()) == ["a", "b"]
    _spoil_footer(path)
    assert wh.query("SELECT build FROM judge_verdicts")["build"].tolist() == ["b"]
    [damage] = wh.damage("a")
    assert damage.reason.startswith("unreadable:") and damage.file.endswith(path.name)


def test_a_run_id_in_the_tombstone_namespace_is_refused(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh", {"probe": PROBE})
    with pytest.raises(WarehouseError, match=r"^probe: run ids starting 'quarantined:' are reserved$"):
        wh.write_partition("probe", {"build": "b1"}, [{"build": "b1", "n": 1, "text": "a"}], "quarantined:x")
    assert not (wh.data / "probe").exists()


def test_a_damaged_older_file_never_hides_the_newer_file_of_its_partition(tmp_path: Path) -> None:
    """The tombstone that replaces a damaged file is dated as that file, so a newer file stays current."""
    wh = Warehouse(tmp_path / "wh")
    wh.initialise()
    older = _verdicts(wh, "a", 0.1, "old")
    newer = _verdicts(wh, "a", 0.2, "new")
    with older.open("r+b") as f:
        f.truncate(100)
    assert [d.file for d in wh.verify()] == [older.relative_to(wh.data).as_posix()]
    assert wh.query("SELECT score FROM judge_verdicts WHERE build = 'a'")["score"].tolist() == [0.2]
    older_ns = older.name.split("-", 1)[0]
    names = sorted(p.name for p in newer.parent.iterdir())
    assert len(names) == 2 and names[1] == newer.name
    assert re.fullmatch(rf"{older_ns}-quarantined-\d+\.parquet", names[0]), names


def test_rows_in_chunks_are_written_in_order_checked_per_chunk_and_appear_whole(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh", {"probe": PROBE})
    rows = [{"build": "b1", "n": i, "text": f"t{i}"} for i in range(10)]
    handed: list[int] = []

    def chunks() -> Iterator[list[dict]]:  # hands out a chunk only when the writer asks for it
        for start in range(0, 10, 3):
            handed.append(start)
            yield rows[start : start + 3]

    path = wh.write_partition_chunks("probe", {"build": "b1"}, chunks(), "run-1")
    assert handed == [0, 3, 6, 9]
    con = duckdb.connect()
    try:
        got = con.execute("SELECT build, n, text, run_id FROM read_parquet(?)", [str(path)]).fetchall()
    finally:
        con.close()
    assert got == [("b1", r["n"], r["text"], "run-1") for r in rows]
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no chunk or temp file left
    assert _parquet_files(wh.data) == [str(path.relative_to(wh.data))]

    # a chunk outside the contract, after good ones: refused naming it, nothing visible, nothing left
    def bad() -> Iterator[list[dict]]:
        yield [dict(r, build="b2") for r in rows[:3]]
        yield [{"build": "b2", "n": 3, "text": "x", "extra": 1}]

    with pytest.raises(WarehouseError, match=r"^probe: unknown columns \['extra'\]$"):
        wh.write_partition_chunks("probe", {"build": "b2"}, bad(), "run-2")
    assert _parquet_files(wh.data) == [str(path.relative_to(wh.data))]
    left = wh.data / "probe" / "build=b2"
    assert not left.exists() or list(left.iterdir()) == []


def test_no_chunks_at_all_write_an_empty_file_with_the_tables_columns(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh", {"probe": PROBE})
    path = wh.write_partition_chunks("probe", {"build": "b1"}, iter([]), "run-1")
    con = duckdb.connect()
    try:
        described = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
        count = con.execute("SELECT count(*) FROM read_parquet(?)", [str(path)]).fetchone()
    finally:
        con.close()
    assert [(name, kind) for name, kind, *_ in described][:3] == [
        ("build", "VARCHAR"),
        ("n", "INTEGER"),
        ("text", "VARCHAR"),
    ]
    assert count == (0,)


def test_a_chunk_duckdb_cannot_write_fails_as_a_warehouse_error_leaving_no_file(tmp_path: Path) -> None:
    """A value that passes the schema check but not DuckDB's cast (an integer out of INTEGER's range), in
    the second chunk: the write fails naming the file, the chunk files already written are removed, and
    the one DuckDB never created is no second error."""
    wh = Warehouse(tmp_path / "wh", {"probe": PROBE})

    def chunks() -> Iterator[list[dict]]:
        yield [{"build": "b1", "n": 1, "text": "a"}]
        yield [{"build": "b1", "n": 2**40, "text": "b"}]

    with pytest.raises(WarehouseError, match=r"^probe: could not write \d+-run-1\.parquet: Conversion Error"):
        wh.write_partition_chunks("probe", {"build": "b1"}, chunks(), "run-1")
    assert [p for p in (tmp_path / "wh").rglob("*") if p.is_file() and p.suffix != ".sqlite"] == []


def test_every_measured_seconds_column_and_timestamp_is_one_two_equal_runs_write_differently() -> None:
    # the comparisons of equal runs (the demo before/after a change, a bucket against a directory) drop
    # these; a new `*_s` column left out would make two equal runs read as different
    for ds in DATASETS.values():
        for column, kind in ds.all_columns:
            if column.endswith("_s") or kind.startswith("TIMESTAMP") or column in ("run_id", "evidence"):
                assert run_varying(column, kind), f"{ds.name}.{column}"
    assert not run_varying("score", "DOUBLE") and not run_varying("build", "VARCHAR")

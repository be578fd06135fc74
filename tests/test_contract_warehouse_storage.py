"""Contract of the warehouse storage port (eval_assets/ports.py): what a partition written through the
one partition writer must be when read back, on every storage implementation.

Implementations (`IMPLEMENTATIONS`): `local`, the warehouse directory under EVAL_HOME.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from eval_assets.warehouse import Dataset, Warehouse, literal_path

IMPLEMENTATIONS = ("local",)  # registered against the port (eval_assets/ports.py)
PROBE = Dataset("probe", ("build",), (("build", "VARCHAR"), ("n", "INTEGER"), ("text", "VARCHAR")))


@pytest.fixture(params=IMPLEMENTATIONS)
def warehouse(request: pytest.FixtureRequest, tmp_path: Path) -> Warehouse:
    assert request.param == "local"
    return Warehouse(tmp_path / "warehouse", {"probe": PROBE})


def _read(path: Path) -> list[tuple[object, ...]]:
    con = duckdb.connect()
    try:
        return con.execute("SELECT build, n, text FROM read_parquet(?) ORDER BY n", [literal_path(path)]).fetchall()
    finally:
        con.close()


def test_a_partition_reads_back_unchanged(warehouse: Warehouse) -> None:
    rows = [{"build": "b1", "n": i, "text": f"row {i} ünïcode"} for i in range(5)]

    path = warehouse.write_partition("probe", {"build": "b1"}, rows, "run-1")

    assert _read(path) == [(r["build"], r["n"], r["text"]) for r in rows]


def test_a_rewritten_partition_is_the_current_one_and_other_partitions_are_untouched(warehouse: Warehouse) -> None:
    warehouse.write_partition("probe", {"build": "b1"}, [{"build": "b1", "n": 1, "text": "first"}], "run-1")
    other = warehouse.write_partition("probe", {"build": "b2"}, [{"build": "b2", "n": 7, "text": "other"}], "run-1")

    again = warehouse.write_partition("probe", {"build": "b1"}, [{"build": "b1", "n": 2, "text": "second"}], "run-2")

    current = warehouse.current_files(["probe"], ["b1", "b2"])
    assert sorted(warehouse.data / entry.path for entry in current.values()) == sorted([again, other])
    assert _read(again) == [("b1", 2, "second")] and _read(other) == [("b2", 7, "other")]


def test_a_row_that_does_not_fit_the_table_is_refused_and_nothing_is_written(warehouse: Warehouse) -> None:
    with pytest.raises(Exception, match="nope"):
        warehouse.write_partition("probe", {"build": "b1"}, [{"build": "b1", "n": 1, "nope": "x"}], "run-1")

    assert warehouse.current_files(["probe"], ["b1"]) == {}

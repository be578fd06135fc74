"""Concurrent publishers on both warehouse kinds: two run processes publishing different builds, one
publishing the same table under another judge version, and one racing the first on its very partition,
while this process reads. Nothing is lost (every write is in the history), a reader never sees a
partition mixed from two writes, and what the catalog names current is what the views read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from object_store import ObjectBackend
from pg import running_cluster

from eval_assets.warehouse import Warehouse

ROWS, WRITES = 40, 6
WRITERS = {  # writer -> (build, judge_version)
    "a": ("b1", "j1"),
    "b": ("b2", "j1"),  # another build
    "c": ("b1", "j2"),  # the same table and build, another judge version
    "d": ("b1", "j1"),  # the very partition of writer a
}

WRITER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from eval_assets.warehouse import Warehouse, DATASETS
    kind, root, url, catalog, name, build, judge, rows, writes = json.loads(sys.argv[1])
    if kind == "local":
        wh = Warehouse(Path(root))
    else:
        from eval_assets.warehouse import ObjectWarehouse
        wh = ObjectWarehouse(Path(root), url, catalog)
    cols = [c for c, _ in DATASETS["judge_verdicts"].columns if c not in ("build", "judge_version")]
    for n in range(writes):
        data = [dict({c: None for c in cols}, scenario_id=f"s{i:03d}", repeat=1, status="scored",
                     score=0.5, author=f"{name}-{n}") for i in range(rows)]
        wh.write_partition("judge_verdicts", {"build": build, "judge_version": judge}, data, f"{name}-{n}")
    """
)


@pytest.fixture(scope="module")
def backend() -> Iterator[ObjectBackend]:
    with running_cluster("object-store warehouse concurrency"):
        pass
    started = ObjectBackend()
    try:
        yield started
    finally:
        started.stop()


@pytest.mark.parametrize("kind", ["local", "object"])
def test_concurrent_publishers_lose_nothing_and_no_reader_sees_a_mix(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = catalog = ""
    env = dict(os.environ)
    if kind == "object":
        from eval_assets.warehouse import ObjectWarehouse

        be: ObjectBackend = request.getfixturevalue("backend")
        for k, v in be.s3.environment().items():
            monkeypatch.setenv(k, v)
        env.update(be.s3.environment())
        url, catalog = be.new_location()
        wh: Warehouse = ObjectWarehouse(tmp_path / "reader", url, catalog)
    else:
        wh = Warehouse(tmp_path / "wh")
    wh.initialise()
    procs = []
    for name, (build, judge) in WRITERS.items():
        root = str(tmp_path / "wh") if kind == "local" else str(tmp_path / f"stage-{name}")
        args = json.dumps([kind, root, url, catalog, name, build, judge, ROWS, WRITES])
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WRITER, args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        )
    reads = 0
    sql = (
        "SELECT build, judge_version, count(*) AS n, count(DISTINCT run_id) AS files, "
        "count(DISTINCT scenario_id) AS scenarios, min(author) = min(run_id) AS tagged "
        "FROM judge_verdicts GROUP BY ALL"
    )
    while any(p.poll() is None for p in procs) or reads == 0:
        for row in wh.rows(sql):  # each partition: one write's rows, all of them
            assert (row["n"], row["files"], row["scenarios"], row["tagged"]) == (ROWS, 1, ROWS, True), row
        reads += 1
    for p in procs:
        out, err = p.communicate()
        assert p.returncode == 0, err.decode()[-2000:]
    history = wh.rows("SELECT run_id, count(*) AS n FROM judge_verdicts_history GROUP BY 1")
    assert sorted((r["run_id"], r["n"]) for r in history) == sorted(
        (f"{name}-{n}", ROWS) for name in WRITERS for n in range(WRITES)
    )  # nothing lost
    newest: dict[tuple[str, str], tuple[object, str]] = {}
    for r in wh.rows("SELECT build, judge_version, written_at, run_id FROM judge_verdicts_history"):
        key = (r["build"], r["judge_version"])
        newest[key] = max(newest.get(key, (r["written_at"], r["run_id"])), (r["written_at"], r["run_id"]))
    current = wh.rows("SELECT DISTINCT build, judge_version, run_id FROM judge_verdicts")
    assert {(r["build"], r["judge_version"]): r["run_id"] for r in current} == {
        k: v[1] for k, v in newest.items()
    }
    files = wh.current_files(["judge_verdicts"], ["b1", "b2"])
    assert {(e.build, e.partition["judge_version"]): e.run_id for e in files.values()} == {
        k: v[1] for k, v in newest.items()
    }  # the catalog's current file is the one the views read
    assert wh.verify(full=True) == [] and reads > 0

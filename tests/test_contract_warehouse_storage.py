"""The warehouse storage contract, run against both implementations (one parameter): the home's
directory (`Warehouse`, SQLite manifest) and an S3-compatible bucket with its catalog in PostgreSQL
(`ObjectWarehouse`: moto's S3 server and a throwaway PostgreSQL cluster, both on 127.0.0.1, started
and stopped by this module).

Every test states one promise of docs/specs/security.md ("An allow you can prove") or docs/warehouse.md and
holds it on both: partitions replace whole, history keeps every file, a file is read only if the
partition writer recorded it and its hash still matches, damage is moved aside with a note (never
deleted), tombstoned and named, and nothing is re-trusted without a person's word.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from object_store import ObjectBackend, Objects
from pg import running_cluster
from shared import full_row

from eval_assets.warehouse import DATASETS, ManifestError, Warehouse

IMPLEMENTATIONS = ("local", "object")  # registered against the port (eval_assets/ports.py)


@pytest.fixture(scope="module")
def backend() -> Iterator[ObjectBackend]:
    with running_cluster("warehouse storage contract"):  # fails (or skips loudly) without PostgreSQL
        pass
    started = ObjectBackend()
    mp = pytest.MonkeyPatch()
    for name, value in started.s3.environment().items():
        mp.setenv(name, value)
    try:
        yield started
    finally:
        mp.undo()
        started.stop()


def _on_a_new_bucket(backend: ObjectBackend, project: Any) -> tuple[Any, str, str]:
    """`project` with its warehouse on a fresh bucket location of `backend` and that location's
    catalog: (the project, the bucket URL, the catalog URL)."""
    import dataclasses

    from eval_assets.config import WarehouseSettings

    url, catalog = backend.new_location()
    warehouse = WarehouseSettings(url=url, catalog=catalog)
    moved = dataclasses.replace(project, settings=project.settings.model_copy(update={"warehouse": warehouse}))
    return moved, url, catalog


@pytest.fixture(params=IMPLEMENTATIONS)
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Warehouse]:
    """A new, initialised, empty warehouse of the parameter's kind."""
    kind = request.param

    def new() -> Warehouse:
        if kind == "local":
            wh = Warehouse(tmp_path / f"wh{len(list(tmp_path.iterdir()))}")
        else:
            from eval_assets.warehouse import ObjectWarehouse

            be: ObjectBackend = request.getfixturevalue("backend")
            url, catalog = be.new_location()
            wh = ObjectWarehouse(tmp_path / f"stage{len(list(tmp_path.iterdir()))}", url, catalog)
            request.addfinalizer(wh.close)
        wh.initialise()
        return wh

    return new


def run_row(scenario: str, output: str = "x", repeat: int = 1) -> dict[str, Any]:
    return full_row(
        "scenario_runs",
        {"scenario_id": scenario, "repeat": repeat, "status": "ok", "output": output, "cost_usd": 0.01},
    )


def current_rel(wh: Warehouse, build: str, table: str = "scenario_runs") -> str:
    [entry] = wh.current_files([table], [build]).values()
    return entry.path


def test_a_partition_replaces_whole_and_history_keeps_every_file(make: Callable[[], Warehouse]) -> None:
    wh = make()
    wh.write_partition("scenario_runs", {"build": "b"}, [run_row("s1"), run_row("s2")], "run-1")
    wh.write_partition("scenario_runs", {"build": "b"}, [run_row("s1", "new")], "run-2")
    wh.write_partition("scenario_runs", {"build": "c"}, [run_row("s1")], "run-3")
    assert wh.rows("SELECT build, scenario_id, output, run_id FROM scenario_runs ORDER BY build") == [
        {"build": "b", "scenario_id": "s1", "output": "new", "run_id": "run-2"},
        {"build": "c", "scenario_id": "s1", "output": "x", "run_id": "run-3"},
    ]
    history = wh.rows("SELECT run_id, count(*) AS n FROM scenario_runs_history GROUP BY 1 ORDER BY 1")
    assert history == [{"run_id": "run-1", "n": 2}, {"run_id": "run-2", "n": 1}, {"run_id": "run-3", "n": 1}]


def test_every_view_answers_on_an_empty_warehouse(make: Callable[[], Warehouse]) -> None:
    wh = make()
    for name in DATASETS:
        assert wh.rows(f"SELECT count(*) AS n FROM {name}") == [{"n": 0}]
        assert wh.rows(f"SELECT count(*) AS n FROM {name}_history") == [{"n": 0}]
    assert wh.rows("SELECT count(*) AS n FROM daily_spend") == [{"n": 0}]


def test_each_write_is_a_new_file_never_a_reused_name(make: Callable[[], Warehouse]) -> None:
    wh = make()
    names = set()
    for n in range(3):
        wh.write_partition("scenario_runs", {"build": "b"}, [run_row("s", str(n))], "same-run")
        names.add(current_rel(wh, "b"))
    assert len(names) == 3
    assert wh.rows("SELECT count(*) AS n FROM scenario_runs_history") == [{"n": 3}]
    assert wh.rows("SELECT output FROM scenario_runs") == [{"output": "2"}]


def test_current_files_name_what_the_view_reads_with_the_hash_of_its_bytes(
    make: Callable[[], Warehouse],
) -> None:
    import hashlib

    wh = make()
    wh.write_partition("scenario_runs", {"build": "b"}, [run_row("s")], "run-1")
    wh.write_partition("scenario_runs", {"build": "b"}, [run_row("s", "newer")], "run-2")
    [entry] = wh.current_files(["scenario_runs"], ["b"]).values()
    assert entry.run_id == "run-2" and entry.partition == {"build": "b"}
    assert hashlib.sha256(Objects(wh).read(entry.path)).hexdigest() == entry.sha256
    assert [r["output"] for r in wh.read_file(entry.path)] == ["newer"]
    assert wh.rehash([entry]) == []


@pytest.mark.parametrize("how", ["edited in place", "deleted", "replaced by an older version"])
def test_a_damaged_current_file_is_set_aside_named_and_its_partition_reads_empty(
    make: Callable[[], Warehouse], how: str
) -> None:
    wh = make()
    files = Objects(wh)
    wh.write_partition("scenario_runs", {"build": "b"}, [run_row("s", "old")], "run-1")
    older = current_rel(wh, "b")
    wh.write_partition("scenario_runs", {"build": "b"}, [run_row("s", "new")], "run-2")
    rel = current_rel(wh, "b")
    wh.write_partition("scenario_runs", {"build": "other"}, [run_row("s")], "run-3")
    data = files.read(rel)
    if how == "edited in place":
        files.write(rel, data[:100] + bytes([data[100] ^ 1]) + data[101:])
    elif how == "deleted":
        files.delete(rel)
    else:
        files.write(rel, files.read(older))
    [entry] = wh.current_files(["scenario_runs"], ["b"]).values()
    damage = wh.rehash([entry])
    assert [(d.file, d.table, d.build) for d in damage] == [(rel, "scenario_runs", "b")]
    assert not files.exists(rel)
    if how == "deleted":
        assert damage[0].moved_to is None and files.quarantined() == []
    else:
        assert files.quarantined() == [rel]  # moved aside, never deleted
    assert [n["file"].endswith(rel) for n in files.notes()] == [True]
    # the damaged current file never lets the older one pass for current; other partitions read on
    assert wh.rows("SELECT build FROM scenario_runs") == [{"build": "other"}]
    assert [d.file for d in wh.damage("b")] == [rel]
    assert wh.damage("other") == []
    wh.write_partition("scenario_runs", {"build": "b"}, [run_row("s", "again")], "run-4")
    assert wh.damage("b") == []  # resolved by a newer file
    assert [d.file for d in wh.damage("b", include_resolved=True)] == [rel]
    assert wh.rows("SELECT output FROM scenario_runs WHERE build = 'b'") == [{"output": "again"}]


def test_a_size_change_is_found_by_the_cheap_check_of_every_read(make: Callable[[], Warehouse]) -> None:
    wh = make()
    files = Objects(wh)
    wh.write_partition("scenario_runs", {"build": "b"}, [run_row("s")], "run-1")
    rel = current_rel(wh, "b")
    files.write(rel, files.read(rel) + b"appended")
    assert wh.rows("SELECT count(*) AS n FROM scenario_runs") == [{"n": 0}]
    [damage] = wh.damage("b")
    assert damage.file == rel and "bytes" in damage.reason


def test_a_same_size_edit_is_found_by_a_full_verify(make: Callable[[], Warehouse]) -> None:
    wh = make()
    files = Objects(wh)
    wh.write_partition("scenario_runs", {"build": "b"}, [run_row("s")], "run-1")
    rel = current_rel(wh, "b")
    data = files.read(rel)
    files.write(rel, data[:50] + bytes([data[50] ^ 1]) + data[51:])
    assert [d.file for d in wh.verify(full=True)] == [rel]
    assert "SHA-256" in wh.damage("b")[0].reason


def test_a_file_the_writer_never_recorded_is_set_aside_not_read(make: Callable[[], Warehouse]) -> None:
    """A stranger dropped beside the current file (a copy of it under a newer name): never read as
    current, moved aside, named as damage of its partition."""
    wh = make()
    files = Objects(wh)
    wh.write_partition("scenario_runs", {"build": "b"}, [run_row("s", "real")], "run-1")
    rel = current_rel(wh, "b")
    stranger = rel.rsplit("/", 1)[0] + "/9999999999999999999-stranger.parquet"
    files.write(stranger, files.read(rel))
    found = wh.verify()
    assert [(d.file, d.build) for d in found] == [(stranger, "b")]
    assert "not" in found[0].reason and files.quarantined() == [stranger]
    assert wh.rows("SELECT output, run_id FROM scenario_runs_history") == [
        {"output": "real", "run_id": "run-1"}
    ]


def test_an_unreadable_file_met_by_a_read_is_set_aside_and_the_read_goes_on(
    make: Callable[[], Warehouse],
) -> None:
    wh = make()
    files = Objects(wh)
    wh.write_partition("scenario_runs", {"build": "b"}, [run_row("s")], "run-1")
    wh.write_partition("scenario_runs", {"build": "c"}, [run_row("s")], "run-2")
    rel = current_rel(wh, "b")
    files.write(rel, b"PAR1" + b"\0" * (len(files.read(rel)) - 4))
    assert wh.rows("SELECT build FROM scenario_runs") == [{"build": "c"}]
    assert [d.file for d in wh.damage("b")] == [rel]


def test_concurrent_quarantine_of_one_file_is_done_once(make: Callable[[], Warehouse]) -> None:
    wh = make()
    files = Objects(wh)
    wh.write_partition("scenario_runs", {"build": "b"}, [run_row("s")], "run-1")
    rel = current_rel(wh, "b")
    files.delete(rel)
    assert len(wh.verify()) == 1
    assert wh.verify() == []  # already recorded: nothing new, nothing moved twice
    assert len(wh.damage("b")) == 1


def test_without_its_record_of_files_the_warehouse_reads_nothing_until_a_rebuild(
    make: Callable[[], Warehouse],
) -> None:
    wh = make()
    wh.write_partition("scenario_runs", {"build": "b"}, [run_row("s")], "run-1")
    lose_the_record(wh)
    with pytest.raises(ManifestError, match="verify --rebuild"):
        wh.rows("SELECT count(*) FROM scenario_runs")
    trusted = wh.rebuild_manifest()
    assert any(t.startswith("scenario_runs/build=b/") for t in trusted)
    assert wh.rows("SELECT scenario_id FROM scenario_runs") == [{"scenario_id": "s"}]


def lose_the_record(wh: Warehouse) -> None:
    """The manifest file deleted (local), or the catalog tables dropped (object store)."""
    if hasattr(wh, "engine"):
        import sqlalchemy as sa

        with wh.engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE warehouse_current, warehouse_files"))
    else:
        wh.manifest_path.unlink()


def test_the_analysts_direct_connection_reads_the_bucket_as_the_track_reads_it(
    make: Callable[[], Warehouse],
) -> None:
    """`ObjectWarehouse.remote_connection` (DuckDB over the bucket's filesystem, no local copies, what
    `evaltrack warehouse sql --remote` opens): the same current rows and history as the track's reads,
    and a damaged object is set aside before it is read. The local directory has no such connection."""
    wh = make()
    if not hasattr(wh, "remote_connection"):
        assert not hasattr(Warehouse, "remote_connection")
        return
    files = Objects(wh)
    wh.write_partition("scenario_runs", {"build": "b"}, [run_row("s1", "old")], "run-1")
    wh.write_partition("scenario_runs", {"build": "b"}, [run_row("s1", "new")], "run-2")
    wh.write_partition("scenario_runs", {"build": "c"}, [run_row("s1")], "run-3")
    sql = "SELECT build, output FROM scenario_runs ORDER BY build"
    con = wh.remote_connection()  # type: ignore[attr-defined]
    try:
        assert con.execute(sql).fetchall() == [("b", "new"), ("c", "x")]
        assert con.execute("SELECT count(*) FROM scenario_runs_history").fetchone() == (3,)
    finally:
        con.close()
    files.delete(current_rel(wh, "c"))
    con = wh.remote_connection()  # type: ignore[attr-defined]
    try:
        assert con.execute(sql).fetchall() == [("b", "new")]
    finally:
        con.close()
    assert [d.build for d in wh.damage()] == ["c"]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    plans=st.lists(
        st.lists(st.tuples(st.integers(0, 300_000), st.integers(0, 70_000)), min_size=20, max_size=40),
        min_size=8,
        max_size=8,
    )
)
def test_one_remote_handle_read_from_many_threads_at_once_gives_each_its_own_bytes(
    backend: ObjectBackend, plans: list[list[tuple[int, int]]]
) -> None:
    """DuckDB reads one handle of the bucket's filesystem from its I/O threads at once, each read a
    `seek` then a `read`: every thread must get the bytes at its own offset, in full (to the end)."""
    import random
    import threading

    from eval_assets.warehouse import Bucket

    url, _ = backend.new_location()
    bucket = Bucket(url)
    data = random.Random(len(plans[0])).randbytes(256 * 1024)
    bucket.put_bytes("data/blob.bin", data)
    wrong: list[tuple[int, int, int]] = []
    with bucket.duckdb_filesystem().open(bucket.uri("data/blob.bin"), "rb") as handle:
        start = threading.Barrier(len(plans))

        def reader(plan: list[tuple[int, int]]) -> None:
            start.wait()
            for offset, n in plan:
                handle.seek(offset)
                got = handle.read(n)
                if got != data[offset : offset + n]:
                    wrong.append((offset, n, len(got)))

        threads = [threading.Thread(target=reader, args=(plan,)) for plan in plans]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert wrong == []


def test_the_analysts_direct_connection_reads_large_objects_as_the_track_reads_them(
    backend: ObjectBackend, tmp_path: Path
) -> None:
    """Objects large enough for DuckDB's Parquet prefetching (several reads of one file at once):
    the remote connection answers, every time, what the track's checked local copies answer."""
    from eval_assets.warehouse import ObjectWarehouse

    url, catalog = backend.new_location()
    wh = ObjectWarehouse(tmp_path / "stage", url, catalog)
    try:
        wh.initialise()
        for build in ("b1", "b2"):
            rows = [
                run_row(f"s{i:05d}", f"an answer {i} of {build}", repeat=r)
                for i in range(2000)
                for r in (1, 2, 3)
            ]
            wh.write_partition("scenario_runs", {"build": build}, rows, f"run-{build}")
        sql = "SELECT build, count(*) AS n, sum(length(output)) AS chars, max(scenario_id) AS last FROM scenario_runs GROUP BY 1 ORDER BY 1"
        expected = [tuple(r.values()) for r in wh.rows(sql)]
        assert [e[1] for e in expected] == [6000, 6000]
        for _ in range(4):
            con = wh.remote_connection()
            try:
                assert con.execute(sql).fetchall() == expected
            finally:
                con.close()
    finally:
        wh.close()


def test_a_throwaway_home_of_a_project_on_object_storage_keeps_to_itself(
    backend: ObjectBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warehouse and journal evaltrack.yaml names are every home's: a check that runs the track in
    a throwaway home (the canary gate) must write under that home only, never into the team's bucket
    and catalog (the demo on a bucket once held the canary's 3 builds beside its own)."""
    import sqlalchemy as sa
    from invariants import security

    from eval_assets.config import load_project
    from eval_assets.gates import GateContext
    from eval_assets.home import PROJECT_ROOT
    from eval_assets.warehouse import Bucket

    on_bucket, url, catalog = _on_a_new_bucket(backend, load_project(PROJECT_ROOT))
    scratch = on_bucket.for_scratch_home()
    assert scratch.settings.warehouse.url is None and scratch.settings.spend.journal_url is None
    assert on_bucket.settings.warehouse.url == url  # the project itself keeps its setting

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    ctx = GateContext(
        root=PROJECT_ROOT,
        gate_id="security.no-api-key-persisted",
        kind="structural",
        build=None,
        milestone=1,
        project_loader=lambda: on_bucket,
    )
    outcome = security.no_api_key_persisted(ctx)
    assert outcome.passed, outcome.findings
    assert Bucket(url).listing("data") == {}
    engine = sa.create_engine(sa.make_url(catalog).set(drivername="postgresql+psycopg"))
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT to_regclass('warehouse_files')")).scalar() is None
    finally:
        engine.dispose()


def test_a_build_registered_in_one_home_is_read_in_another_through_the_bucket(
    backend: ObjectBackend, tmp_path: Path
) -> None:
    """Two pods, no shared volume: `build add` in one stores the manifest in the bucket; the other
    lists, resolves and orders it alike (the same bytes, the same registration order), and a manifest
    already registered differently is still refused."""
    from shared import changed_manifest

    from eval_assets.capability.builds import Builds
    from eval_assets.config import ConfigError, load_project
    from eval_assets.home import PROJECT_ROOT, EvalHome

    project, _, _ = _on_a_new_bucket(backend, load_project(PROJECT_ROOT))
    here = Builds(project, EvalHome(tmp_path / "pod-a").ensure())
    there = Builds(project, EvalHome(tmp_path / "pod-b").ensure())
    first = here.register(changed_manifest(tmp_path, project, "baseline.yaml"))
    second = here.register(changed_manifest(tmp_path, project, "rebuild.yaml"))
    assert there.ids() == here.ids() == sorted([first.id, second.id])
    assert there.by_registration() == here.by_registration()
    assert there.resolve(second.id) == second
    assert there.path(second.id).read_bytes() == here.path(second.id).read_bytes()
    (tmp_path / "x").mkdir()
    other = changed_manifest(tmp_path / "x", project, "rebuild.yaml", milestone=1)
    with pytest.raises(ConfigError, match="already registered with a different manifest"):
        Builds(project, EvalHome(tmp_path / "pod-c").ensure()).register(other)


def test_a_scratch_home_refuses_to_keep_what_must_outlive_its_pod(
    backend: ObjectBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EVAL_HOME_SCRATCH=1 (a pod's emptyDir): a warehouse, spend journal or build registry that would
    live in the home is refused, naming the variable and the setting; with both on shared stores the
    track opens."""
    import dataclasses

    from shared import changed_manifest

    from eval_assets.capability.builds import Builds
    from eval_assets.capability.errors import TrackError
    from eval_assets.capability.track import Track
    from eval_assets.config import load_project
    from eval_assets.home import PROJECT_ROOT, EvalHome

    monkeypatch.setenv("EVAL_HOME_SCRATCH", "1")
    shipped = load_project(PROJECT_ROOT)
    with pytest.raises(TrackError, match="EVAL_HOME_SCRATCH=1") as refused:
        Track(shipped, EvalHome(tmp_path / "pod-a"))
    assert "warehouse: {url, catalog}" in str(refused.value) and "spend.journal_url" in str(refused.value)
    assert not (tmp_path / "pod-a" / "warehouse").exists()
    with pytest.raises(TrackError, match="build registry"):
        Builds(shipped, EvalHome(tmp_path / "pod-b").ensure()).register(
            changed_manifest(tmp_path, shipped, "baseline.yaml")
        )

    on_bucket, url, catalog = _on_a_new_bucket(backend, shipped)
    with pytest.raises(TrackError, match="spend.journal_url") as refused:
        Track(on_bucket, EvalHome(tmp_path / "pod-c"))
    assert "warehouse: {url" not in str(refused.value)
    spend = shipped.settings.spend.model_copy(update={"journal_url": catalog})
    shared = dataclasses.replace(on_bucket, settings=on_bucket.settings.model_copy(update={"spend": spend}))
    track = Track(shared, EvalHome(tmp_path / "pod-d"))
    try:
        assert track.warehouse.location.startswith(url)
    finally:
        track.warehouse.close()  # type: ignore[attr-defined]


# a password in a URL, assembled so that no line of this file reads as a checked-in credential
USERINFO = ":" + "pw" + "@"


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"url": "s3://bucket/prefix"}, "both url and catalog"),
        ({"catalog": "postgresql+psycopg://u@h:5432/db"}, "both url and catalog"),
        ({"url": "s3://key" + USERINFO + "bucket/p", "catalog": "postgresql+psycopg://u@h:5432/db"}, "url"),
        ({"url": "https://bucket.example/p", "catalog": "postgresql+psycopg://u@h:5432/db"}, "url"),
        ({"url": "s3://bucket/p", "catalog": "postgresql+psycopg://u" + USERINFO + "h:5432/db"}, "password"),
        ({"url": "s3://bucket/p", "catalog": "sqlite:///x.sqlite"}, "catalog"),
    ],
)
def test_the_warehouse_setting_refuses_credentials_and_half_a_location(
    given: dict[str, str], field: str
) -> None:
    from pydantic import ValidationError

    from eval_assets.config import WarehouseSettings
    from eval_assets.warehouse import open_warehouse

    with pytest.raises(ValidationError, match=field):
        WarehouseSettings.model_validate(given)
    assert type(open_warehouse(Path("/nonexistent/wh"), WarehouseSettings())) is Warehouse  # the default


def test_warehouse_sql_answers_over_the_views_and_a_bad_query_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from eval_assets.cli import main

    home = tmp_path / "home"
    Warehouse(home / "warehouse").write_partition("scenario_runs", {"build": "b"}, [run_row("s")], "run-1")
    sql = "SELECT build, scenario_id FROM scenario_runs"
    assert main(["--home", str(home), "warehouse", "sql", sql, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"build": "b", "scenario_id": "s"}]
    assert main(["--home", str(home), "warehouse", "sql", "SELECT nope FROM scenario_runs"]) == 1
    assert "nope" in capsys.readouterr().err

"""The warehouse: Parquet partitions (the one partition writer) and the DuckDB catalog of views.

Result tables are Parquet files under `<home>/warehouse/data/<dataset>/<key>=<value>/...`, one file per
materialization of a partition, written to a temp name, fsynced and renamed into place, tagged with the
run id. The `<dataset>` view picks the newest file per partition; `<dataset>_history` shows them all.
`warehouse.duckdb` holds only views (absolute paths), is rebuilt in a temp file and renamed, and is
never opened read-write by a run, so analysts holding it read-only never block a writer.

Damage (issue 11): the partition writer records every file it writes in the manifest
`partitions.sqlite` (path, dataset, partition, build, size, SHA-256, mtime) before renaming it into
place. Every read through `connect()`/`query()` first checks the files against it: a file that is
missing, whose size changed, whose content no longer has its hash, that DuckDB cannot read, or that
the partition writer never wrote is *damaged*: it is moved (never deleted) to
`<home>/warehouse/quarantine/` with a note naming file, table, build and reason, and marked damaged in
the manifest. In its place the writer puts a *tombstone*: a one-row file with the damaged file's
partition and `written_at` and run_id `quarantined:<file>`. The views drop tombstone rows, and a
tombstone that is the newest file of its partition makes the partition empty, so a damaged current
file never lets an older one pass for current. Everything else reads on. `damage(build)` lists the
damage that no newer file of the same partition has replaced: `release-status` exits 4 on it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd


@dataclass(frozen=True)
class Dataset:
    name: str
    partition_by: tuple[str, ...]
    columns: tuple[tuple[str, str], ...]  # (name, DuckDB type); run_id and written_at are appended
    dedupe_by: tuple[str, ...] | None = None  # current view keeps the newest row per this key
    append_only: bool = False  # every file is current (e.g. imported human scores); nothing replaces

    @property
    def all_columns(self) -> tuple[tuple[str, str], ...]:
        return self.columns + (("run_id", "VARCHAR"), ("written_at", "TIMESTAMP"))


_RUN = (("build", "VARCHAR"), ("scenario_id", "VARCHAR"), ("repeat", "INTEGER"))

DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in [
        Dataset(
            "scenario_runs",
            ("build",),
            _RUN
            + (
                ("suite", "VARCHAR"),
                ("source", "VARCHAR"),
                ("attempt_id", "VARCHAR"),
                ("model", "VARCHAR"),
                ("status", "VARCHAR"),
                ("output", "VARCHAR"),
                ("policy_failures", "INTEGER"),
                ("cost_usd", "DOUBLE"),
                ("prompt_tokens", "INTEGER"),
                ("completion_tokens", "INTEGER"),
                ("tries", "INTEGER"),
                ("latency_s", "DOUBLE"),
                ("error_kind", "VARCHAR"),
                ("error", "VARCHAR"),
                ("excluded_reason", "VARCHAR"),
                # replay loop (issue 7): model calls made, and tool calls the recording did not hold
                ("turns", "INTEGER"),
                ("replay_misses", "INTEGER"),
            ),
        ),
        Dataset(
            "judge_verdicts",
            ("build", "judge_version"),
            (
                ("build", "VARCHAR"),
                ("judge_version", "VARCHAR"),
                ("scenario_id", "VARCHAR"),
                ("repeat", "INTEGER"),
            )
            + (
                ("attempt_id", "VARCHAR"),
                ("rubric", "VARCHAR"),
                ("status", "VARCHAR"),
                ("score", "DOUBLE"),
                ("criteria", "VARCHAR"),
                ("source", "VARCHAR"),
                ("failure_reason", "VARCHAR"),
                ("policy_failures", "INTEGER"),
                ("cost_usd", "DOUBLE"),
                ("tries", "INTEGER"),
                ("author", "VARCHAR"),
            ),
        ),
        Dataset(
            "cost_ledger",
            (
                "build",
                "published_for",
            ),  # published per build × judge version; subject rows keep judge_version NULL
            (
                ("attempt_key", "VARCHAR"),
                ("build", "VARCHAR"),
                ("judge_version", "VARCHAR"),
                ("scenario_id", "VARCHAR"),
                ("repeat", "INTEGER"),
                ("role", "VARCHAR"),
                ("try_no", "INTEGER"),
                ("model", "VARCHAR"),
                ("status", "VARCHAR"),
                ("ceiling", "VARCHAR"),
                ("reserved_usd", "DOUBLE"),
                ("cost_usd", "DOUBLE"),
                ("prompt_tokens", "INTEGER"),
                ("completion_tokens", "INTEGER"),
                ("day", "VARCHAR"),
                ("published_for", "VARCHAR"),
            ),
            dedupe_by=("attempt_key",),
        ),
        # --- release statistics (noise bands, reports, decisions) ---
        Dataset(
            "noise_bands",
            ("build", "judge_version"),
            (
                ("build", "VARCHAR"),
                ("judge_version", "VARCHAR"),
                ("scope", "VARCHAR"),
                ("scenario_id", "VARCHAR"),
                ("mean", "DOUBLE"),
                ("half_width", "DOUBLE"),
                ("low", "DOUBLE"),
                ("high", "DOUBLE"),
                ("n_repeats", "DOUBLE"),
                ("within_var", "DOUBLE"),
                ("between_var", "DOUBLE"),
            ),
        ),
        Dataset(
            "capability_reports",
            ("build", "judge_version"),
            (
                ("build", "VARCHAR"),
                ("judge_version", "VARCHAR"),
                ("baseline", "VARCHAR"),
                ("finding", "VARCHAR"),
                ("scenario_id", "VARCHAR"),
                ("statistic", "DOUBLE"),
                ("p_value", "DOUBLE"),
                ("q_value", "DOUBLE"),
                ("verdict", "VARCHAR"),
                ("detail", "VARCHAR"),
                ("source", "VARCHAR"),
                # the report's own simulated A/A rates (the same on every row of one report)
                ("aa_flag_rate", "DOUBLE"),
                ("aa_block_rate", "DOUBLE"),
            ),
        ),
        Dataset(
            "release_decision_reasons",
            ("build",),
            (
                ("build", "VARCHAR"),
                ("decision", "VARCHAR"),
                ("rank", "INTEGER"),
                ("severity", "VARCHAR"),
                ("source", "VARCHAR"),
                ("finding", "VARCHAR"),
                ("scenario_ids", "VARCHAR"),
                ("message", "VARCHAR"),
                ("advice", "VARCHAR"),
            ),
        ),
        Dataset(
            "release_decisions",
            ("build",),
            (
                ("build", "VARCHAR"),
                ("decision", "VARCHAR"),
                ("reasons", "VARCHAR"),
                ("judge_versions", "VARCHAR"),
                ("baseline", "VARCHAR"),
            ),
        ),
        # --- deterministic suite ---
        # One row per gate, invalid registry entry, converted case and ordinary test of a build's
        # suite run (eval_assets.gates.SuiteResult.gate_rows). status: pass / fail / pending / error /
        # awaiting_assertions; blocks: fail or error and not quarantined (only tests are quarantined).
        Dataset(
            "gate_results",
            ("build",),
            (
                ("build", "VARCHAR"),
                ("gate_id", "VARCHAR"),
                ("kind", "VARCHAR"),
                ("milestone", "INTEGER"),
                ("status", "VARCHAR"),
                ("duration_s", "DOUBLE"),
                ("message", "VARCHAR"),
                ("declared_in", "VARCHAR"),
                ("retried", "BOOLEAN"),
                ("quarantined", "BOOLEAN"),
                ("blocks", "BOOLEAN"),
                ("ran_at", "TIMESTAMP"),
            ),
        ),
        # Flaky-test history: one row per ordinary (non-gate) test run, never replaced
        # (eval_assets.gates.SuiteResult.quarantine_rows). The quarantine rules replay it.
        Dataset(
            "test_quarantine",
            ("build",),
            (
                ("build", "VARCHAR"),
                ("test_id", "VARCHAR"),
                ("ran_at", "TIMESTAMP"),
                ("status", "VARCHAR"),
                ("first_try", "VARCHAR"),
                ("retried", "BOOLEAN"),
                ("failed", "BOOLEAN"),
                ("quarantined", "BOOLEAN"),
                ("quarantined_from", "TIMESTAMP"),
                ("quarantined_until", "TIMESTAMP"),
                ("message", "VARCHAR"),
            ),
            append_only=True,
        ),
        # --- judge governance ---
        # Bridge runs (eval_assets.bridge.run_bridge): METHODS §5 figures for a judge version that
        # declares `bridges_from`, one row per materialization. Figures are in `unit` (rubric points
        # on [scale_low, scale_high], or the normalised score with one point = point_size); reasons
        # (one per line) say why an unpublished calibration was not published; builds comma-joined.
        Dataset(
            "calibration_offsets",
            ("judge_to",),
            (
                ("judge_from", "VARCHAR"),
                ("judge_to", "VARCHAR"),
                ("published", "BOOLEAN"),
                ("reasons", "VARCHAR"),
                ("offset", "DOUBLE"),
                ("ci_low", "DOUBLE"),
                ("ci_high", "DOUBLE"),
                ("half_width", "DOUBLE"),
                ("sd_diff", "DOUBLE"),
                ("ba_low", "DOUBLE"),
                ("ba_high", "DOUBLE"),
                ("slope", "DOUBLE"),
                ("slope_ci_low", "DOUBLE"),
                ("slope_ci_high", "DOUBLE"),
                ("equating_intercept", "DOUBLE"),
                ("equating_slope", "DOUBLE"),
                ("spearman_rho", "DOUBLE"),
                ("krippendorff_alpha", "DOUBLE"),  # after calibration: the acceptance figure
                ("krippendorff_alpha_raw", "DOUBLE"),  # before calibration
                ("n_outputs", "INTEGER"),
                ("n_scenarios", "INTEGER"),
                ("n_needed", "INTEGER"),
                ("builds", "VARCHAR"),
                ("unit", "VARCHAR"),
                ("scale_low", "DOUBLE"),
                ("scale_high", "DOUBLE"),
                ("point_size", "DOUBLE"),
                ("level", "DOUBLE"),
            ),
        ),
        # Human scores (eval_assets.human_scores.import_scores): append-only, one file per import and
        # build; nothing updates or deletes a row. A retraction is a new row whose `retracts` names
        # the retracted score_id (criteria NULL for a pure retraction). `score` is the rubric's
        # normalised weighted aggregate, computed in code as for judge verdicts.
        Dataset(
            "human_scores",
            ("build",),
            (
                ("score_id", "VARCHAR"),
                ("build", "VARCHAR"),
                ("scenario_id", "VARCHAR"),
                ("repeat", "INTEGER"),
                ("attempt_id", "VARCHAR"),
                ("judge_version", "VARCHAR"),
                ("rubric", "VARCHAR"),
                ("source", "VARCHAR"),
                ("criteria", "VARCHAR"),
                ("score", "DOUBLE"),
                ("author", "VARCHAR"),
                ("retracts", "VARCHAR"),
                ("imported_from", "VARCHAR"),
                ("line", "INTEGER"),
            ),
            append_only=True,
        ),
    ]
}


# Views over the dataset views (analyst-facing joins and sums), created after them in this order.
DERIVED_VIEWS: list[tuple[str, str]] = [
    (
        "daily_spend",
        "SELECT day, model, role, count(*) AS calls, sum(coalesce(cost_usd, 0)) AS cost_usd, "
        "sum(CASE WHEN status = 'reserved' THEN reserved_usd ELSE 0 END) AS unsettled_reserved_usd "
        "FROM cost_ledger WHERE status <> 'refused' GROUP BY ALL ORDER BY ALL",
    ),
    (
        "ceiling_hits_daily",  # a tracked figure: never blocks
        "SELECT day, count(*) FILTER (WHERE status = 'refused') AS refused, count(*) AS reservations, "
        "count(*) FILTER (WHERE status = 'refused') / count(*) AS hit_rate, "
        "list_sort(list_distinct(list(ceiling) FILTER (WHERE ceiling IS NOT NULL))) AS ceilings "
        "FROM cost_ledger GROUP BY day ORDER BY day",
    ),
    (
        "exclusions",
        "SELECT build, judge_version, count(*) FILTER (WHERE status = 'excluded') AS excluded, count(*) AS verdicts, "
        "count(*) FILTER (WHERE status = 'excluded') / count(*) AS exclusion_rate, "
        "count(DISTINCT scenario_id) FILTER (WHERE status = 'excluded') AS excluded_scenarios "
        "FROM judge_verdicts GROUP BY ALL ORDER BY ALL",
    ),
    # --- judge governance ---
    (
        # human scores in force: not a pure retraction, not retracted; one row per score_id even if
        # two concurrent imports appended the same row
        "human_scores_current",
        "SELECT * FROM human_scores h WHERE h.criteria IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM human_scores r WHERE r.retracts = h.score_id) "
        "QUALIFY row_number() OVER (PARTITION BY h.score_id ORDER BY h.written_at, h.run_id) = 1",
    ),
    (
        # Per judge version: agreement with the current human scores of the SAME attempts under the
        # same rubric, on the normalised score (one pair per human score row). kappa_quadratic is
        # 1 - mean (j - h)^2 / E_chance (j - h)^2 with the observed marginals: Cohen's quadratic-weighted
        # kappa (exact for one equally spaced ordinal criterion); alpha is Krippendorff's interval
        # alpha for two coders; spearman_rho is the correlation of mid-ranks. NULL when undefined.
        "judge_agreement",
        "WITH pairs AS (SELECT v.judge_version, v.rubric, v.score AS j, h.score AS h, h.author, "
        "v.build || '/' || v.scenario_id || '/' || CAST(v.repeat AS VARCHAR) AS attempt "
        "FROM judge_verdicts v JOIN human_scores_current h ON v.build = h.build "
        "AND v.scenario_id = h.scenario_id AND v.repeat = h.repeat AND v.rubric = h.rubric "
        "WHERE v.status = 'scored' AND v.score IS NOT NULL AND h.score IS NOT NULL), "
        "ranked AS (SELECT *, rank() OVER (PARTITION BY judge_version ORDER BY j) "
        "+ (count(*) OVER (PARTITION BY judge_version, j) - 1) / 2.0 AS rj, "
        "rank() OVER (PARTITION BY judge_version ORDER BY h) "
        "+ (count(*) OVER (PARTITION BY judge_version, h) - 1) / 2.0 AS rh FROM pairs), "
        "agg AS (SELECT judge_version, any_value(rubric) AS rubric, count(*) AS n, "
        "count(DISTINCT attempt) AS n_attempts, count(DISTINCT author) AS n_authors, "
        "avg(j) AS judge_mean, avg(h) AS human_mean, avg((j - h) * (j - h)) AS msd, "
        "var_pop(j) + var_pop(h) + (avg(j) - avg(h)) * (avg(j) - avg(h)) AS chance_msd, "
        "(sum(j * j) + sum(h * h) - (sum(j) + sum(h)) * (sum(j) + sum(h)) / (2.0 * count(*))) "
        "/ (2.0 * count(*) - 1) AS pooled_var, corr(rj, rh) AS rho FROM ranked GROUP BY judge_version) "
        "SELECT judge_version, rubric, n, n_attempts, n_authors, judge_mean, human_mean, "
        "CASE WHEN n >= 2 AND chance_msd > 1e-12 THEN 1 - msd / chance_msd END AS kappa_quadratic, "
        "CASE WHEN n >= 2 AND pooled_var > 1e-12 THEN 1 - msd / (2 * pooled_var) END AS krippendorff_alpha, "
        "CASE WHEN n >= 2 AND isfinite(rho) THEN rho END AS spearman_rho "
        "FROM agg ORDER BY judge_version",
    ),
]


# Trends over builds. A trend never feeds a release decision (those compare one judge version only);
# where a build was scored only by an older judge version that has a PUBLISHED bridge to a newer one,
# `score_trend_spliced` carries its mean onto the newer version's scale and marks the point spliced.
DERIVED_VIEWS += [
    (
        "score_trend",
        "SELECT build, judge_version, avg(score) AS mean_score, count(score) AS scored, "
        "count(*) FILTER (WHERE status = 'excluded') AS excluded, max(written_at) AS judged_at "
        "FROM judge_verdicts WHERE source = 'model' GROUP BY build, judge_version",
    ),
    (
        "score_trend_spliced",
        "WITH cal AS (SELECT * FROM calibration_offsets WHERE published), "
        "native AS (SELECT build, judge_version AS trend_version, mean_score, false AS spliced, "
        "NULL::VARCHAR AS spliced_from FROM score_trend), "
        "spliced AS (SELECT t.build, c.judge_to AS trend_version, "
        "((CASE WHEN c.equating_slope IS NOT NULL "
        "THEN c.equating_intercept + c.equating_slope * (c.scale_low + t.mean_score * (c.scale_high - c.scale_low)) "
        'ELSE c.scale_low + t.mean_score * (c.scale_high - c.scale_low) + c."offset" END) - c.scale_low) '
        "/ (c.scale_high - c.scale_low) AS mean_score, true AS spliced, t.judge_version AS spliced_from "
        "FROM score_trend t JOIN cal c ON t.judge_version = c.judge_from "
        "WHERE NOT EXISTS (SELECT 1 FROM score_trend n WHERE n.build = t.build AND n.judge_version = c.judge_to)) "
        "SELECT * FROM native UNION ALL SELECT * FROM spliced",
    ),
]


# Typed columns for analysts: the files keep JSON text / joined strings; the views give DuckDB JSON and
# lists, so no query parses strings. release_decisions.reasons is the decision's structured reasons
# (from release_decision_reasons, same build and run), most severe first.
VIEW_COLUMNS: dict[str, dict[str, str]] = {
    "judge_verdicts": {"criteria": "CAST(criteria AS JSON)"},
    "human_scores": {"criteria": "CAST(criteria AS JSON)"},
    "release_decisions": {
        "judge_versions": "list_filter(string_split(coalesce(judge_versions, ''), ','), lambda v: v <> '')",
        "reasons": "coalesce((SELECT list({'rank': r.rank, 'severity': r.severity, 'source': r.source, "
        "'finding': r.finding, 'scenario_ids': list_filter(string_split(coalesce(r.scenario_ids, ''), ','), "
        "lambda v: v <> ''), 'message': r.message, 'advice': r.advice} ORDER BY r.rank) "
        "FROM read_parquet('{reasons_glob}', union_by_name = true) r "
        "WHERE r.build = d.build AND r.run_id = d.run_id), [])",
    },
}

# Long views for per-criterion analysis, created after the dataset views.
DERIVED_VIEWS += [
    (
        "verdict_criteria",
        "SELECT build, judge_version, scenario_id, repeat, rubric, criterion, "
        "TRY_CAST(json_extract_string(criteria, '$.\"' || criterion || '\"') AS DOUBLE) AS value, "
        "status, attempt_id FROM (SELECT *, unnest(json_keys(criteria)) AS criterion "
        "FROM judge_verdicts WHERE criteria IS NOT NULL)",
    ),
]


class WarehouseError(Exception):
    """A write or catalog step that could not complete; nothing half-written is visible."""


TOMBSTONE_PREFIX = "quarantined:"
_LIVE = f"coalesce(run_id, '') NOT LIKE '{TOMBSTONE_PREFIX}%'"


@dataclass(frozen=True)
class Damage:
    """A damaged partition file, as the manifest records it."""

    file: str  # where it was, relative to the data directory
    table: str
    build: str | None
    partition: dict[str, str]
    reason: str
    moved_to: str | None  # None: it was missing
    noticed_at: str
    resolved: bool = False  # a newer file of the same partition has been written since

    def text(self) -> str:
        where = f"moved to {self.moved_to}" if self.moved_to else "nothing left to move"
        return (
            f"damaged warehouse file {self.file} (table {self.table}, build {self.build or '-'}): "
            f"{self.reason}; {where}"
        )


_MANIFEST_SCHEMA = """
CREATE TABLE IF NOT EXISTS partition_files (
    path TEXT PRIMARY KEY,      -- relative to the data directory
    dataset TEXT NOT NULL,
    partition_json TEXT NOT NULL,
    build TEXT,
    run_id TEXT NOT NULL,
    written_at_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    mtime_ns INTEGER,
    state TEXT NOT NULL CHECK (state IN ('writing', 'written', 'damaged')),
    reason TEXT,
    moved_to TEXT,
    noticed_at TEXT
)
"""


@dataclass
class _Entry:
    path: str
    dataset: str
    partition: dict[str, str]
    build: str | None
    run_id: str
    written_at_ns: int
    size: int
    sha256: str
    mtime_ns: int | None
    state: str
    reason: str | None = None
    moved_to: str | None = None
    noticed_at: str | None = None


def _q(path: Path) -> str:
    return str(path).replace("'", "''")


class Warehouse:
    """Parquet datasets under `root/data` and the catalog `root/warehouse.duckdb`."""

    def __init__(self, root: Path, datasets: Mapping[str, Dataset] = DATASETS):
        self.root = root.resolve()
        self.data = self.root / "data"
        self.catalog_path = self.root / "warehouse.duckdb"
        self.manifest_path = self.root / "partitions.sqlite"
        self.quarantine = self.root / "quarantine"
        self.datasets = dict(datasets)

    # --- initialisation ------------------------------------------------------------------------

    def initialise(self) -> None:
        """Create the dataset directories, a schema-only file per dataset, and the catalog if stale."""
        adopt = not self.manifest_path.exists()
        self.root.mkdir(parents=True, exist_ok=True)
        with self._manifest() as con:
            con.execute(_MANIFEST_SCHEMA)
        if adopt:  # a warehouse written before the manifest: its readable files are taken as they are
            self._adopt_existing()
        for ds in self.datasets.values():
            self._ensure_schema_file(ds)
        if not self._catalog_current():
            self._build_catalog()

    def view_sql(self) -> list[str]:
        """CREATE VIEW statements for every dataset: `<name>_history` and the current `<name>`."""
        out = []
        for ds in self.datasets.values():
            glob = _q(self.data / ds.name / "**" / "*.parquet")
            typed = VIEW_COLUMNS.get(ds.name)
            select = "*"
            if typed:
                reasons_glob = _q(self.data / "release_decision_reasons" / "**" / "*.parquet")
                exprs = ", ".join(
                    f"{expr.replace('{reasons_glob}', reasons_glob)} AS {col}" for col, expr in typed.items()
                )
                select = f"* REPLACE ({exprs})"
            raw = f"(SELECT {select} FROM read_parquet('{glob}', union_by_name = true) d)"
            out.append(f"CREATE OR REPLACE VIEW {ds.name}_history AS SELECT * FROM {raw} WHERE {_LIVE}")
            part = ", ".join(ds.partition_by)
            if ds.append_only:
                out.append(f"CREATE OR REPLACE VIEW {ds.name} AS SELECT * FROM {ds.name}_history")
                continue
            # tombstones take part in picking a partition's newest file, then are dropped (module doc)
            current = (
                f"SELECT * FROM (SELECT * FROM {raw} "
                f"QUALIFY dense_rank() OVER (PARTITION BY {part} ORDER BY written_at DESC, run_id DESC) = 1) "
                f"WHERE {_LIVE}"
            )
            if ds.dedupe_by:
                key = ", ".join(ds.dedupe_by)
                current = (
                    f"SELECT * FROM ({current}) "
                    f"QUALIFY row_number() OVER (PARTITION BY {key} ORDER BY written_at DESC, run_id DESC) = 1"
                )
            out.append(f"CREATE OR REPLACE VIEW {ds.name} AS {current}")
        out += [f"CREATE OR REPLACE VIEW {name} AS {sql}" for name, sql in DERIVED_VIEWS]
        return out

    def _catalog_current(self) -> bool:
        if not self.catalog_path.exists():
            return False
        try:
            con = duckdb.connect(str(self.catalog_path), read_only=True)
            try:
                row = con.execute("SELECT version, data_root FROM _catalog").fetchone()
            finally:
                con.close()
        except duckdb.Error:
            return False
        return row == (self._catalog_version(), str(self.data))

    def _catalog_version(self) -> str:
        """Changes whenever any view definition changes, so a stale catalog is rebuilt."""
        return hashlib.sha256("\n".join(self.view_sql()).encode()).hexdigest()[:16]

    def _build_catalog(self) -> None:
        """Build the catalog in a temp file and rename it over the old one (readers keep the old inode)."""
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".warehouse.{os.getpid()}.{time.time_ns()}.duckdb.tmp"
        con = duckdb.connect(str(tmp))
        try:
            for stmt in self.view_sql():
                con.execute(stmt)
            con.execute(
                "CREATE TABLE _catalog AS SELECT ? AS version, ? AS data_root",
                [self._catalog_version(), str(self.data)],
            )
            con.execute("CHECKPOINT")
        finally:
            con.close()
        _fsync(tmp)
        os.replace(tmp, self.catalog_path)
        wal = tmp.with_name(tmp.name + ".wal")
        if wal.exists():
            wal.unlink()

    # --- the one partition writer --------------------------------------------------------------

    def write_partition(
        self,
        dataset: str,
        partition: Mapping[str, str],
        rows: Sequence[Mapping[str, Any]] | pd.DataFrame,
        run_id: str,
    ) -> Path:
        """Write one partition's rows as a new file; readers see the old file or the new, never a mix.

        Every row must carry the partition's key values. The file is recorded in the manifest (size,
        hash) before it is renamed into place. Returns the path written.
        """
        if run_id.startswith(TOMBSTONE_PREFIX):
            raise WarehouseError(f"{dataset}: run ids starting {TOMBSTONE_PREFIX!r} are reserved")
        return self._write_partition(dataset, partition, rows, run_id)

    def _write_partition(
        self,
        dataset: str,
        partition: Mapping[str, str],
        rows: Sequence[Mapping[str, Any]] | pd.DataFrame,
        run_id: str,
        written_at: int | None = None,
    ) -> Path:
        ds = self.datasets[dataset]
        if set(partition) != set(ds.partition_by):
            raise WarehouseError(f"{dataset}: partition must be {ds.partition_by}, got {tuple(partition)}")
        frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
        names = [c for c, _ in ds.columns]
        unknown = sorted(set(frame.columns) - set(names))
        if unknown:
            raise WarehouseError(f"{dataset}: unknown columns {unknown}")
        for key, value in partition.items():
            if key in frame.columns and len(frame) and not (frame[key] == value).all():
                raise WarehouseError(f"{dataset}: rows outside partition {key}={value}")
        frame = frame.reindex(columns=names).assign(**{k: v for k, v in partition.items()})
        tombstone = written_at is not None
        written_at = written_at if written_at is not None else time.time_ns()
        frame["run_id"] = run_id
        frame["written_at"] = pd.Timestamp(written_at, unit="ns")
        directory = self.data / dataset
        for key in ds.partition_by:
            directory = directory / f"{key}={partition[key]}"
        name = f"{written_at}-quarantined-{time.time_ns()}" if tombstone else f"{written_at}-{run_id}"
        target = directory / f"{name}.parquet"
        self._write_file(ds, frame, target, dict(partition), run_id, written_at)
        return target

    def _write_file(
        self,
        ds: Dataset,
        frame: pd.DataFrame,
        target: Path,
        partition: dict[str, str] | None = None,
        run_id: str = "",
        written_at: int = 0,
    ) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f".{target.name}.{os.getpid()}.part"
        cols = ", ".join(f'CAST("{c}" AS {t}) AS "{c}"' for c, t in ds.all_columns)
        con = duckdb.connect()
        try:
            con.register("frame", frame)
            con.execute(f"COPY (SELECT {cols} FROM frame) TO '{_q(tmp)}' (FORMAT parquet)")
        except duckdb.Error as exc:
            tmp.unlink(missing_ok=True)
            raise WarehouseError(f"{ds.name}: could not write {target.name}: {exc}") from exc
        finally:
            con.close()
        _fsync(tmp)
        rel = target.relative_to(self.data).as_posix()
        size, digest = tmp.stat().st_size, _sha256(tmp)
        partition = partition or {}
        with self._manifest() as mf:  # recorded before it is visible, so a listed file always has a row
            mf.execute(
                "INSERT OR REPLACE INTO partition_files (path, dataset, partition_json, build, run_id, "
                "written_at_ns, size, sha256, mtime_ns, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, 'writing')",
                [
                    rel,
                    ds.name,
                    json.dumps(partition, sort_keys=True),
                    partition.get("build"),
                    run_id,
                    written_at,
                    size,
                    digest,
                ],
            )
        os.replace(tmp, target)
        _fsync_dir(target.parent)
        with self._manifest() as mf:
            mf.execute(
                "UPDATE partition_files SET state = 'written', mtime_ns = ? WHERE path = ? AND state = 'writing'",
                [target.stat().st_mtime_ns, rel],
            )

    # --- reading (an in-memory connection over the same views; never the catalog file) ---------

    def connect(self) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with every view defined, over verified files (`verify`)."""
        return self._with_quarantine(lambda con: con)

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
        """Run `sql` over the views. A file DuckDB cannot read is quarantined and the query run again."""

        def run(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
            try:
                return con.execute(sql, params or []).df()
            finally:
                con.close()

        return self._with_quarantine(run)

    def _with_quarantine(self, use: Any) -> Any:
        """`use(connection with the views)`; a data file DuckDB names in an error is quarantined, and
        the whole thing done again (at most _MAX_QUARANTINES_PER_QUERY times)."""
        for _ in range(_MAX_QUARANTINES_PER_QUERY):
            self.verify()
            con = duckdb.connect()
            try:
                for stmt in self.view_sql():
                    con.execute(stmt)
                return use(con)
            except duckdb.Error as exc:
                con.close()
                bad = self._files_named_in(str(exc))
                if not bad:
                    raise
                for rel in bad:
                    self._quarantine(rel, f"unreadable: {_first_line(exc)}")
        raise WarehouseError(f"more than {_MAX_QUARANTINES_PER_QUERY} damaged files met by one read")

    # --- damage (see the module docstring) -----------------------------------------------------

    def verify(self) -> list[Damage]:
        """Check every data file against the manifest; quarantine what is damaged. Returns the new damage.

        Files are listed before the manifest is read (a listed file's row, written before its rename, is
        then always seen); a row whose file was not listed is looked up again before it counts as missing.
        """
        if not self.manifest_path.exists():
            self.initialise()
        listed = {p.relative_to(self.data).as_posix() for p in self.data.rglob("*.parquet")}
        entries = {e.path: e for e in self._entries()}
        found = []
        for rel in sorted(listed - set(entries)):
            found += self._quarantine(rel, "not written by the partition writer (no manifest entry)")
        for rel, entry in sorted(entries.items()):
            if entry.state == "damaged":
                continue
            path = self.data / rel
            try:
                stat = path.stat()
            except FileNotFoundError:
                if entry.state == "written":
                    found += self._quarantine(rel, "missing: the file was deleted")
                continue
            if stat.st_size != entry.size:
                found += self._quarantine(rel, f"size is {stat.st_size} bytes, {entry.size} were written")
            elif stat.st_mtime_ns != entry.mtime_ns and entry.state == "written":
                if _sha256(path) != entry.sha256:
                    found += self._quarantine(rel, "content changed since it was written (SHA-256 differs)")
                else:
                    with self._manifest() as mf:
                        mf.execute(
                            "UPDATE partition_files SET mtime_ns = ? WHERE path = ?", [stat.st_mtime_ns, rel]
                        )
        return found

    def damage(self, build: str | None = None, *, include_resolved: bool = False) -> list[Damage]:
        """Recorded damage (of one build's partitions, if given), oldest first. Unresolved unless a newer
        file of the same partition (not a tombstone) was written since."""
        entries = self._entries()
        newest: dict[tuple[str, str], int] = {}
        for e in entries:
            if e.state != "damaged" and not e.run_id.startswith(TOMBSTONE_PREFIX):
                key = (e.dataset, json.dumps(e.partition, sort_keys=True))
                newest[key] = max(newest.get(key, 0), e.written_at_ns)
        out = []
        for e in sorted(entries, key=lambda e: (e.noticed_at or "", e.path)):
            if e.state != "damaged" or (build is not None and e.build != build):
                continue
            resolved = newest.get((e.dataset, json.dumps(e.partition, sort_keys=True)), 0) > e.written_at_ns
            if resolved and not include_resolved:
                continue
            out.append(
                Damage(
                    e.path,
                    e.dataset,
                    e.build,
                    e.partition,
                    e.reason or "",
                    e.moved_to,
                    e.noticed_at or "",
                    resolved,
                )
            )
        return out

    def _quarantine(self, rel: str, reason: str) -> list[Damage]:
        """Move `rel` aside (never delete it), mark it damaged and tombstone its partition. Returns the
        damage, or nothing when another process already did it."""
        path = self.data / rel
        entry = next((e for e in self._entries() if e.path == rel), None)
        if entry is None:  # not the writer's: recorded now, so it is named like any other damage
            dataset = rel.split("/", 1)[0]
            parts = dict(p.split("=", 1) for p in rel.split("/")[1:-1] if "=" in p)
            entry = _Entry(
                rel, dataset, parts, parts.get("build"), "", _written_at(rel), -1, "", None, "written"
            )
            with self._manifest() as mf:
                mf.execute(
                    "INSERT OR IGNORE INTO partition_files (path, dataset, partition_json, build, run_id, "
                    "written_at_ns, size, sha256, state) VALUES (?, ?, ?, ?, '', ?, -1, '', 'written')",
                    [rel, dataset, json.dumps(parts, sort_keys=True), entry.build, entry.written_at_ns],
                )
        noticed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with self._manifest() as mf:  # one process claims it
            claimed = mf.execute(
                "UPDATE partition_files SET state = 'damaged', reason = ?, noticed_at = ? "
                "WHERE path = ? AND state <> 'damaged'",
                [reason, noticed, rel],
            ).rowcount
        if not claimed:
            return []
        target = self.quarantine / f"{time.time_ns()}" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(path, target)
            moved: str | None = str(target)
        except FileNotFoundError:
            moved = None
        note = {
            "file": str(path),
            "table": entry.dataset,
            "build": entry.build,
            "partition": entry.partition,
            "reason": reason,
            "noticed_at": noticed,
            "moved_to": moved,
        }
        notes = self.quarantine / "notes"
        notes.mkdir(parents=True, exist_ok=True)
        (notes / f"{time.time_ns()}-{rel.replace('/', '__')}.json").write_text(json.dumps(note, indent=2))
        with self._manifest() as mf:
            mf.execute("UPDATE partition_files SET moved_to = ? WHERE path = ?", [moved, rel])
        ds = self.datasets.get(entry.dataset)
        if ds is not None and rel.split("/")[1] == "_schema":
            self._ensure_schema_file(ds)
        elif ds is not None and set(entry.partition) == set(ds.partition_by):
            self._write_partition(
                ds.name, entry.partition, [dict(entry.partition)], TOMBSTONE_PREFIX + rel, entry.written_at_ns
            )
        return [Damage(rel, entry.dataset, entry.build, entry.partition, reason, moved, noticed)]

    def _ensure_schema_file(self, ds: Dataset) -> None:
        schema_file = self.data / ds.name / "_schema" / "empty.parquet"
        if not schema_file.exists():
            self._write_file(ds, pd.DataFrame(columns=[c for c, _ in ds.all_columns]), schema_file)

    def _adopt_existing(self) -> None:
        """Record the files of a warehouse written before the manifest; one DuckDB cannot read is damaged."""
        for path in sorted(self.data.rglob("*.parquet")):
            rel = path.relative_to(self.data).as_posix()
            parts = dict(p.split("=", 1) for p in rel.split("/")[1:-1] if "=" in p)
            with self._manifest() as mf:
                mf.execute(
                    "INSERT OR IGNORE INTO partition_files (path, dataset, partition_json, build, run_id, "
                    "written_at_ns, size, sha256, mtime_ns, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'written')",
                    [
                        rel,
                        rel.split("/", 1)[0],
                        json.dumps(parts, sort_keys=True),
                        parts.get("build"),
                        "adopted",
                        _written_at(rel),
                        path.stat().st_size,
                        _sha256(path),
                        path.stat().st_mtime_ns,
                    ],
                )
            con = duckdb.connect()
            try:
                con.execute("SELECT count(*) FROM read_parquet(?)", [str(path)]).fetchall()
            except duckdb.Error as exc:
                self._quarantine(rel, f"unreadable: {_first_line(exc)}")
            finally:
                con.close()

    def _files_named_in(self, message: str) -> list[str]:
        root = str(self.data) + os.sep
        out = []
        for found in re.finditer(re.escape(root) + r"[^'\"\n*?]*?\.parquet", message):
            rel = found[0][len(root) :]
            if (self.data / rel).is_file():
                out.append(rel)
        return sorted(set(out))

    def _manifest(self) -> _Manifest:
        return _Manifest(self.manifest_path)

    def _entries(self) -> list[_Entry]:
        with self._manifest() as mf:
            rows = mf.execute(
                "SELECT path, dataset, partition_json, build, run_id, written_at_ns, size, sha256, mtime_ns, "
                "state, reason, moved_to, noticed_at FROM partition_files"
            ).fetchall()
        return [
            _Entry(
                r[0], r[1], json.loads(r[2]), r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12]
            )
            for r in rows
        ]


_MAX_QUARANTINES_PER_QUERY = 20


class _Manifest:
    """One short SQLite transaction on the manifest (WAL; waits for another process's write lock)."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = sqlite3.connect(self.path, timeout=30.0)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute(_MANIFEST_SCHEMA)  # a warehouse used without `initialise()` gets it too
        return self.con

    def __exit__(self, exc_type: object, *_: object) -> None:
        try:
            if exc_type is None:
                self.con.commit()
            else:
                self.con.rollback()
        finally:
            self.con.close()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _written_at(rel: str) -> int:
    stem = rel.rsplit("/", 1)[-1].split("-", 1)[0]
    return int(stem) if stem.isdigit() else 0


def _first_line(exc: object) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

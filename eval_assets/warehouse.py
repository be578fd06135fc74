"""The warehouse: Parquet partitions (the one partition writer) and the DuckDB catalog of views.

Result tables are Parquet files under `<home>/warehouse/data/<dataset>/<key>=<value>/...`, one file per
materialization of a partition, written to a temp name, fsynced and renamed into place, tagged with the
run id. The `<dataset>` view picks the newest file per partition; `<dataset>_history` shows them all.
`warehouse.duckdb` holds only views (absolute paths), is rebuilt in a temp file and renamed, and is
never opened read-write by a run, so analysts holding it read-only never block a writer.
"""

from __future__ import annotations

import hashlib
import os
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


class WarehouseError(Exception):
    """A write or catalog step that could not complete; nothing half-written is visible."""


def _q(path: Path) -> str:
    return str(path).replace("'", "''")


class Warehouse:
    """Parquet datasets under `root/data` and the catalog `root/warehouse.duckdb`."""

    def __init__(self, root: Path, datasets: Mapping[str, Dataset] = DATASETS):
        self.root = root.resolve()
        self.data = self.root / "data"
        self.catalog_path = self.root / "warehouse.duckdb"
        self.datasets = dict(datasets)

    # --- initialisation ------------------------------------------------------------------------

    def initialise(self) -> None:
        """Create the dataset directories, a schema-only file per dataset, and the catalog if stale."""
        for ds in self.datasets.values():
            schema_file = self.data / ds.name / "_schema" / "empty.parquet"
            if not schema_file.exists():
                self._write_file(ds, pd.DataFrame(columns=[c for c, _ in ds.all_columns]), schema_file)
        if not self._catalog_current():
            self._build_catalog()

    def view_sql(self) -> list[str]:
        """CREATE VIEW statements for every dataset: `<name>_history` and the current `<name>`."""
        out = []
        for ds in self.datasets.values():
            glob = _q(self.data / ds.name / "**" / "*.parquet")
            out.append(
                f"CREATE OR REPLACE VIEW {ds.name}_history AS "
                f"SELECT * FROM read_parquet('{glob}', union_by_name = true)"
            )
            part = ", ".join(ds.partition_by)
            if ds.append_only:
                out.append(f"CREATE OR REPLACE VIEW {ds.name} AS SELECT * FROM {ds.name}_history")
                continue
            current = (
                f"SELECT * FROM {ds.name}_history "
                f"QUALIFY dense_rank() OVER (PARTITION BY {part} ORDER BY written_at DESC, run_id DESC) = 1"
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

        Every row must carry the partition's key values. Returns the path written.
        """
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
        written_at = time.time_ns()
        frame["run_id"] = run_id
        frame["written_at"] = pd.Timestamp(written_at, unit="ns")
        directory = self.data / dataset
        for key in ds.partition_by:
            directory = directory / f"{key}={partition[key]}"
        target = directory / f"{written_at}-{run_id}.parquet"
        self._write_file(ds, frame, target)
        return target

    def _write_file(self, ds: Dataset, frame: pd.DataFrame, target: Path) -> None:
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
        os.replace(tmp, target)
        _fsync_dir(target.parent)

    # --- reading (an in-memory connection over the same views; never the catalog file) ---------

    def connect(self) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with every view defined; the caller closes it."""
        con = duckdb.connect()
        for stmt in self.view_sql():
            con.execute(stmt)
        return con

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
        con = self.connect()
        try:
            return con.execute(sql, params or []).df()
        finally:
            con.close()


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

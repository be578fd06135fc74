"""The table schemas of the warehouse, in one place, and the check every row passes before it is written.

A `Dataset` names its partition keys and its columns with their DuckDB types; `run_id` and
`written_at` are added by the writer. `check_rows` refuses a row that lacks a column of its table
or carries one the table does not have: a producer that forgets a column gets an error naming
the table and the column, never a NULL in the file.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is imported where frames are made: release-status reads none
    import pandas as pd


class WarehouseError(Exception):
    """A write or catalog step that could not complete; nothing half-written is visible."""


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

# what two equal runs of the same builds write differently: the run's id, measured seconds (`*_s`),
# the evidence (it names files by run id) and every TIMESTAMP column (`run_varying`)
_VARYING = frozenset({"run_id", "latency_s", "call_s", "duration_s", "evidence"})


def run_varying(column: str, duckdb_type: str) -> bool:
    """Whether `column` differs between two equal runs (its values are not what a run decided)."""
    return column in _VARYING or duckdb_type.startswith("TIMESTAMP")


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
                # the digest of the policy the attempt was checked under (NULL: under none in force)
                ("policy_digest", "VARCHAR"),
                ("cost_usd", "DOUBLE"),
                ("prompt_tokens", "INTEGER"),
                ("completion_tokens", "INTEGER"),
                ("tries", "INTEGER"),
                ("latency_s", "DOUBLE"),
                ("error_kind", "VARCHAR"),
                ("error", "VARCHAR"),
                ("excluded_reason", "VARCHAR"),
                # replay loop: model calls made, and tool calls the recording did not hold
                ("turns", "INTEGER"),
                ("replay_misses", "INTEGER"),
                # agent subjects: the calls the track's endpoint saw, as redacted JSON (docs/agents.md)
                ("trajectory", "VARCHAR"),
                # adaptive repeats: the design the run looked under (NULL: the fixed count was run)
                ("adaptive_start", "INTEGER"),
                ("adaptive_maximum", "INTEGER"),
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
                ("call_s", "DOUBLE"),
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
                ("evidence", "VARCHAR"),  # JSON: the files and manifests it read (eval_assets.evidence)
            ),
        ),
        # --- deterministic suite ---
        # One row per gate, invalid registry entry, converted case and ordinary test of a build's
        # suite run (eval_assets.gates.gate_result_rows). status: pass / fail / pending / error /
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
        # (eval_assets.gates.quarantine_rows). The quarantine rules replay it.
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
        # Bridge runs (eval_assets.bridge.run_bridge): docs/methods.md: bridges figures for a judge version that
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
                ("offset_points", "DOUBLE"),  # the offset in rubric points (`unit`)
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
        # The review queue (eval_assets.review), exported from the journal database after every change
        # of a build's items: the warehouse stays readable without the journal. Times are UTC epoch
        # seconds; the `review_queue` view shows them as timestamps and a lapsed claim as open.
        Dataset(
            "review_items",
            ("build",),
            (
                ("item_id", "VARCHAR"),
                ("reason", "VARCHAR"),
                ("build", "VARCHAR"),
                ("judge_version", "VARCHAR"),
                ("scenario_id", "VARCHAR"),
                ("repeat", "INTEGER"),
                ("priority", "INTEGER"),
                ("detail", "VARCHAR"),
                ("enqueued_at", "DOUBLE"),
                ("state", "VARCHAR"),
                ("claimed_by", "VARCHAR"),
                ("claimed_at", "DOUBLE"),
                ("expires_at", "DOUBLE"),
                ("done_by", "VARCHAR"),
                ("done_at", "DOUBLE"),
                ("score_id", "VARCHAR"),
            ),
        ),
        # The score trend of one judge version over the registered builds (eval_assets.trend): one row
        # per build in registration order (`position`); status native / spliced (carried through a
        # published bridge from `source_version`) / break (a bridge on the way is not published: no
        # value) / missing (no verdicts). Written by the `score_trend` asset.
        Dataset(
            "score_trend_points",
            ("trend_version",),
            (
                ("position", "INTEGER"),
                ("build", "VARCHAR"),
                ("trend_version", "VARCHAR"),
                ("status", "VARCHAR"),
                ("mean_score", "DOUBLE"),
                ("scored", "INTEGER"),
                ("source_version", "VARCHAR"),
                ("spliced", "BOOLEAN"),
                ("reason", "VARCHAR"),
                ("score_low", "DOUBLE"),  # a spliced point's interval: the bridges' offset CIs carried along
                ("score_high", "DOUBLE"),
                ("bridges", "INTEGER"),  # bridges crossed to reach the trend's scale (0: native)
            ),
        ),
    ]
}


def check_rows(
    ds: Dataset, partition: Mapping[str, str], rows: Sequence[Mapping[str, Any]] | pd.DataFrame
) -> pd.DataFrame:
    """The rows as a frame with exactly the table's columns, in schema order; the partition's key
    values are filled in (a row may leave them out, or must carry the same values).

    Raises WarehouseError naming the table and the column when a row lacks a column of the table
    or has one the table does not have, or when a row lies outside the partition.
    """
    import pandas as pd  # paid only where frames are made (release-status makes none)

    names = [c for c, _ in ds.columns]
    known = set(names)
    required = known - set(partition)
    if isinstance(rows, pd.DataFrame):
        frame = rows
        shapes = [set(frame.columns)] if len(frame.columns) or len(frame) else []
    else:
        shapes = [set(r) for r in rows]
        # lone surrogates replaced before the frame is made: a pyarrow-backed string column refuses them
        bad = sorted({c for r in rows for c, v in r.items() if _unstorable(v)})
        frame = pd.DataFrame([{c: valid_text(v) if _unstorable(v) else v for c, v in r.items()} for r in rows])
        for column in bad:
            _named_bad_text(ds, partition, column, sum(1 for r in rows if _unstorable(r.get(column))))
    unknown = sorted({c for columns in shapes for c in columns} - known)
    if unknown:
        raise WarehouseError(f"{ds.name}: unknown columns {unknown}")
    missing = sorted({c for columns in shapes for c in required - columns}, key=names.index)
    if missing:
        raise WarehouseError(f"{ds.name}: missing columns {missing}")
    for key, value in partition.items():
        if key in frame.columns and len(frame) and not (frame[key] == value).all():
            raise WarehouseError(f"{ds.name}: rows outside partition {key}={value}")
    frame = frame.reindex(columns=names).assign(**{k: v for k, v in partition.items()})
    for column in [c for c in frame.columns if frame[c].dtype.kind == "O"]:
        cells = frame[column]
        bad = [i for i, v in enumerate(cells) if _unstorable(v)]
        if bad:  # text that is not valid UTF-8 is stored, with U+FFFD in its place, and named
            frame[column] = [valid_text(v) if isinstance(v, str) else v for v in cells]
            _named_bad_text(ds, partition, column, len(bad))
    return frame


def _unstorable(value: object) -> bool:
    return isinstance(value, str) and not value.isascii() and _SURROGATE.search(value) is not None


def _named_bad_text(ds: Dataset, partition: Mapping[str, str], column: str, rows: int) -> None:
    _log.warning(
        "%s[%s]: column %s of %d row(s) held text that is not valid UTF-8 (lone surrogates); stored "
        "with U+FFFD in their place",
        ds.name,
        "|".join(partition.values()),
        column,
        rows,
    )


_SURROGATE = re.compile("[\ud800-\udfff]")
_log = logging.getLogger("eval_assets.warehouse")


def valid_text(text: str) -> str:
    """`text` with every lone surrogate (not valid UTF-8, so not storable) replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)

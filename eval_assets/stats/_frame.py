"""Verdict frames: the one place that validates the columns and aggregates repeats per scenario.

A verdict frame holds ONE build's verdicts under ONE judge version, one row per (scenario, repeat):
`scenario_id` (str), `repeat` (int), `status` (`scored`/`failed`/`excluded`), `score` (float in [0, 1],
NaN unless scored) and `policy_failures` (int >= 0). Optional: `judge_version` (a single value) and
`has_output` (did the subject attempt produce an output; see `release_invariant`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import pandas as pd

COLUMNS: Final = ("scenario_id", "repeat", "status", "score", "policy_failures")
STATUSES: Final = frozenset({"scored", "failed", "excluded"})
SCENARIO_COLUMNS: Final = (
    "n_rows",
    "n_output",
    "n_attempts",
    "n_excluded",
    "n_scored",
    "score_sum",
    "mean",
    "variance",
    "min_score",
    "policy_failures",
    "attempts_with_policy_failure",
    "n_below_floor",
)


class VerdictFrameError(ValueError):
    """A frame that cannot be read as one build's verdicts under one judge version."""


def release_invariant(
    status: Sequence[str] | np.ndarray,
    policy_failures: Sequence[int] | np.ndarray,
    has_output: Sequence[object] | np.ndarray | None = None,
) -> np.ndarray:
    """THE release-statistics invariant, shared by the track (`exclude_stopped_scenarios`, on the rows
    it writes) and the statistics (`validate_verdicts`, on the rows it reads). Returns `has_output`.

    - An attempt produced output when its subject returned text, whatever its status became later: a
      scenario stopped by a ceiling is excluded from the SCORES as a whole, but the outputs its
      attempts produced were checked, and their policy failures count.
    - A policy failure is only ever observed on an output: a row with policy failures and no output
      is refused (`VerdictFrameError`), never silently zeroed. A scored row has an output.
    - Where `has_output` is unknown (None, NaN, or no column): a row that is not excluded, or that
      carries a policy failure, produced output.
    """
    status = np.asarray(status, dtype=object)
    policy = np.asarray(policy_failures, dtype=np.int64)
    inferred = (status != "excluded") | (policy > 0)
    if has_output is None:
        return np.asarray(inferred)
    given = pd.array(list(has_output), dtype="boolean")
    known = ~np.asarray(given.isna())
    values = np.where(known, np.asarray(given.fillna(False), dtype=bool), inferred)
    if np.any(known & (policy > 0) & ~values):
        raise VerdictFrameError(
            "a row without output carries policy failures: a policy check needs an output"
        )
    if np.any(known & (status == "scored") & ~values):
        raise VerdictFrameError("a scored row has no output: only an output can be scored")
    return np.asarray(values)


def validate_verdicts(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Return a normalized copy of `verdicts` (columns `COLUMNS` and `has_output`, plus `judge_version`).

    A frame with no rows is "no verdicts" whatever its columns, and comes back empty with the
    expected columns. Raises `VerdictFrameError` naming the problem for: missing columns, an unknown
    status, a missing scenario id, a repeat that is not a whole number >= 0, a scored row without a
    finite score in [0, 1], a failed or excluded row that carries a score (fail closed: such a row
    must record no value), negative or missing policy counts, a policy count on an excluded row, or
    a (scenario_id, repeat) that appears twice.
    """
    if len(verdicts) == 0:
        return _empty_frame()
    missing = [c for c in COLUMNS if c not in verdicts.columns]
    if missing:
        raise VerdictFrameError(f"verdict frame lacks column(s): {', '.join(missing)}")
    status = _statuses(verdicts["status"])
    frame = pd.DataFrame(
        {
            "scenario_id": _scenario_ids(verdicts["scenario_id"]),
            "repeat": _whole_numbers(verdicts["repeat"], "repeat"),
            "status": status,
            "score": _scores(verdicts["score"], status == "scored"),
            "policy_failures": _whole_numbers(verdicts["policy_failures"], "policy_failures"),
        }
    )
    if "judge_version" in verdicts.columns:
        frame["judge_version"] = verdicts["judge_version"].to_numpy(dtype=object)
    given = verdicts["has_output"].to_numpy(dtype=object) if "has_output" in verdicts.columns else None
    frame["has_output"] = release_invariant(status, frame["policy_failures"].to_numpy(), given)
    _check_unique(frame)
    return frame


def judge_versions(frame: pd.DataFrame) -> tuple[str, ...]:
    """The distinct judge versions named by a frame's `judge_version` column (empty if absent)."""
    if "judge_version" not in frame.columns:
        return ()
    return tuple(sorted(str(v) for v in frame["judge_version"].dropna().unique()))


def scenario_table(frame: pd.DataFrame, floor: float | None = None) -> pd.DataFrame:
    """Per-scenario aggregates of a validated frame, indexed by `scenario_id` (sorted).

    Columns `SCENARIO_COLUMNS`: row counts (`n_attempts` rows not excluded, `n_output` rows whose
    attempt produced an output, excluded or not), the sum/mean/sample variance (ddof=1)/minimum of the
    scored repeats, the policy-failure count over attempts with output and the number of such attempts
    with at least one, and the scored repeats below `floor` (0 without a floor). `mean` and `min_score`
    are NaN for a scenario with no scored repeat, `variance` is NaN with fewer than two: never 0.
    """
    codes, ids = pd.factorize(frame["scenario_id"], sort=True)
    n = len(ids)
    status = frame["status"].to_numpy(dtype=object)
    attempt = status != "excluded"
    output = frame["has_output"].to_numpy(dtype=bool) if "has_output" in frame else attempt
    policy = np.where(output, frame["policy_failures"].to_numpy(dtype=np.int64), 0)
    scored = status == "scored"
    sc, x = codes[scored], frame["score"].to_numpy(dtype=float)[scored]
    n_scored = np.bincount(sc, minlength=n)
    score_sum = np.bincount(sc, weights=x, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n_scored > 0, score_sum / n_scored, np.nan)
        squares = np.bincount(sc, weights=(x - mean[sc]) ** 2, minlength=n)
        variance = np.where(n_scored > 1, squares / (n_scored - 1), np.nan)
    lowest = np.full(n, np.inf)
    np.minimum.at(lowest, sc, x)
    table = pd.DataFrame(
        {
            "n_rows": np.bincount(codes, minlength=n),
            "n_output": np.bincount(codes[output], minlength=n),
            "n_attempts": np.bincount(codes[attempt], minlength=n),
            "n_excluded": np.bincount(codes[~attempt], minlength=n),
            "n_scored": n_scored,
            "score_sum": score_sum,
            "mean": mean,
            "variance": variance,
            "min_score": np.where(n_scored > 0, lowest, np.nan),
            "policy_failures": np.bincount(codes, weights=policy, minlength=n).astype(np.int64),
            "attempts_with_policy_failure": np.bincount(codes[policy > 0], minlength=n),
            "n_below_floor": np.bincount(sc[x < floor], minlength=n)
            if floor is not None
            else np.zeros(n, int),
        },
        index=pd.Index(np.asarray(ids, dtype=object), name="scenario_id"),
    )
    return table.loc[:, list(SCENARIO_COLUMNS)]


def scored_matrix(frame: pd.DataFrame, scenario_ids: pd.Index) -> np.ndarray:
    """Scored repeats as an (n_scenarios, max_repeats) float array in `scenario_ids` order, NaN-padded.

    Scenarios in `scenario_ids` without scored repeats get an all-NaN row.
    """
    scored = frame.loc[frame["status"] == "scored", ["scenario_id", "score"]]
    rows = scenario_ids.get_indexer(scored["scenario_id"])
    keep = rows >= 0
    rows, scores = rows[keep], scored["score"].to_numpy()[keep]
    order = np.argsort(rows, kind="stable")
    rows, scores = rows[order], scores[order]
    starts = np.searchsorted(rows, rows, side="left")
    cols = np.arange(len(rows)) - starts
    width = int(cols.max()) + 1 if len(cols) else 1
    matrix = np.full((len(scenario_ids), width), np.nan)
    matrix[rows, cols] = scores
    return matrix


def _empty_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "scenario_id": pd.Series([], dtype="object"),
            "repeat": pd.Series([], dtype="int64"),
            "status": pd.Series([], dtype="object"),
            "score": pd.Series([], dtype="float64"),
            "policy_failures": pd.Series([], dtype="int64"),
            "has_output": pd.Series([], dtype="bool"),
        }
    )


def _statuses(column: pd.Series) -> np.ndarray:
    status = column.to_numpy(dtype=object)
    unknown = sorted(str(v) for v in pd.unique(status) if v not in STATUSES)
    if unknown:
        raise VerdictFrameError(f"unknown status value(s): {', '.join(unknown)}")
    return status


def _scenario_ids(column: pd.Series) -> np.ndarray:
    if column.isna().any():
        raise VerdictFrameError("scenario_id is missing on some rows")
    return column.astype(str).to_numpy(dtype=object)


def _whole_numbers(column: pd.Series, name: str) -> np.ndarray:
    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype="float64")
    if not np.all(np.isfinite(values) & (np.mod(values, 1) == 0) & (values >= 0)):
        raise VerdictFrameError(f"{name} must be a whole number >= 0 on every row")
    return values.astype(np.int64)


def _scores(column: pd.Series, scored: np.ndarray) -> np.ndarray:
    score = pd.to_numeric(column, errors="coerce").to_numpy(dtype="float64")
    with np.errstate(invalid="ignore"):
        bad = scored & ~(np.isfinite(score) & (score >= 0.0) & (score <= 1.0))
    if bad.any():
        raise VerdictFrameError(f"{int(bad.sum())} scored row(s) lack a finite score in [0, 1]")
    stray = ~scored & ~np.isnan(score)
    if stray.any():
        raise VerdictFrameError(
            f"{int(stray.sum())} failed/excluded row(s) carry a score; they must record no value"
        )
    return score


def _check_unique(frame: pd.DataFrame) -> None:
    codes, ids = pd.factorize(frame["scenario_id"])
    repeat = frame["repeat"].to_numpy()
    keys = codes.astype(np.int64) * (int(repeat.max()) + 1) + repeat
    unique, counts = np.unique(keys, return_counts=True)
    if len(unique) < len(keys):
        key = int(unique[np.argmax(counts > 1)])
        sid, rep = ids[key // (int(repeat.max()) + 1)], key % (int(repeat.max()) + 1)
        raise VerdictFrameError(f"scenario {sid!r} repeat {rep} appears more than once")

"""The track's row shapes and the one rule applied to them before they are written.

`exclude_stopped_scenarios` is the stopped-scenario exclusion (applied to `scenario_runs` and
`judge_verdicts` rows); `cost_ledger_row` is the one shape of a published journal row. Every row
is checked against its table's schema (`eval_assets.warehouse`) by the partition writer.
`Summary` is what every materialization function returns: values for the metadata, a markdown
body, and the files it wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_assets.spend import JournalRow
from eval_assets.stats import release_invariant


@dataclass(frozen=True)
class Summary:
    """One materialization's outcome: `values` (counts and figures for its metadata), `markdown` (a
    body to show, may be empty), `files` (what it wrote besides its warehouse partition) and `log`
    ((level, line) pairs for the run's log: level `info`, `warning` or `error`)."""

    values: Mapping[str, Any] = field(default_factory=dict)
    markdown: str = ""
    files: Mapping[str, Path] = field(default_factory=dict)
    log: tuple[tuple[str, str], ...] = ()

    def __getitem__(self, key: str) -> Any:
        return self.values[key]


def exclude_stopped_scenarios(
    rows: list[dict[str, Any]],
    reason_key: str = "excluded_reason",
    has_output: Callable[[dict[str, Any]], bool] | None = None,
) -> list[dict[str, Any]]:
    """A scenario with any excluded attempt leaves the distribution whole: all its rows become excluded.

    Which repeats ran before a ceiling stopped a scenario depends on timing; excluding the scenario as a
    whole keeps the result deterministic. Outputs, costs AND policy failures of the attempts that ran
    are kept: the rows are checked against the release-statistics invariant the statistics read them
    with (`eval_assets.stats.release_invariant`): a policy failure on an attempt that produced output
    counts, excluded scenario or not; one on an attempt without output is an error, here, not later.
    `has_output(row)` says whether a row's attempt produced output (default: `row["output"]`).
    """
    stopped: dict[str, str] = {}
    for r in rows:
        if r["status"] == "excluded":
            stopped.setdefault(r["scenario_id"], str(r.get(reason_key) or "excluded"))
    out = []
    for r in rows:
        if r["scenario_id"] in stopped and r["status"] != "excluded":
            r = dict(r, status="excluded", **{reason_key: f"scenario stopped: {stopped[r['scenario_id']]}"})
            if "score" in r:
                r["score"] = None
        out.append(r)
    produced = has_output or (lambda row: row.get("output") is not None)
    release_invariant(
        [r["status"] if r["status"] in ("scored", "excluded") else "failed" for r in out],
        [int(r.get("policy_failures") or 0) for r in out],
        [produced(r) for r in out],
    )
    return out


CHUNK_ROWS = 2000
"""About how many rows a producer hands the partition writer at a time (a scenario is never split)."""


def scenario_chunks(
    rows: Iterable[dict[str, Any]],
    rule: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
    keep: tuple[str, ...],
    kept: list[dict[str, Any]],
    size: int = CHUNK_ROWS,
) -> Iterator[list[dict[str, Any]]]:
    """Rows in (scenario id, repeat) order, in chunks of about `size` rows that never split a scenario,
    each passed through `rule` (the stopped-scenario exclusion, which needs a scenario's rows together).

    What the materialization's summary needs of each row (the `keep` columns) is appended to `kept`,
    so the full rows are held one chunk at a time.
    """
    chunk: list[dict[str, Any]] = []
    for row in rows:
        if len(chunk) >= size and row["scenario_id"] != chunk[-1]["scenario_id"]:
            done = rule(chunk)
            kept.extend({k: r[k] for k in keep} for r in done)
            yield done
            chunk = []
        chunk.append(row)
    if chunk or not kept:
        done = rule(chunk)
        kept.extend({k: r[k] for k in keep} for r in done)
        yield done


def cost_ledger_row(r: JournalRow) -> dict[str, Any]:
    """One journal row as published to `cost_ledger` (`published_for` comes from the partition)."""
    return {
        "attempt_key": r.attempt_key,
        "build": r.build,
        "judge_version": r.judge_version,
        "scenario_id": r.scenario_id,
        "repeat": r.repeat,
        "role": r.role,
        "try_no": r.try_no,
        "model": r.model,
        "status": r.status,
        "ceiling": r.ceiling,
        "reserved_usd": r.reserved_usd,
        "cost_usd": r.cost_usd,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "day": r.day,
    }

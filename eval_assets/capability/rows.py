"""The track's rows: one builder per table, and the one rule applied to them before they are written.

`scenario_run_rows`, `judge_verdict_rows` and `cost_ledger_rows` are the only places the rows of
`scenario_runs`, `judge_verdicts` and `cost_ledger` are shaped (the engine returns plain results);
the first two apply the stopped-scenario exclusion (`exclude_stopped_scenarios`). Every row is
checked against its table's schema (`eval_assets.warehouse`) by the partition writer.
`Summary` is what every materialization function returns: values for the metadata, a markdown
body, and the files it wrote.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from eval_assets.config import BuildManifest, Judge, Rubric
from eval_assets.engine import JudgeResult, SubjectResult, stored_trajectory
from eval_assets.spend import JournalRow, attempt_id
from eval_assets.stats import AdaptiveDesign, release_invariant

T = TypeVar("T")


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


def scenario_run_rows(
    build: BuildManifest, results: Sequence[SubjectResult], design: AdaptiveDesign | None = None
) -> list[dict[str, Any]]:
    """The `scenario_runs` rows of one build's subject attempts, the stopped-scenario exclusion applied.
    `design`: the run looked after `design.start` repeats (adaptive repeats); every row records it, so
    the build's report combines the looks the run made whatever the project's setting is by then."""
    rows = [
        {
            "build": build.id,
            "scenario_id": r.scenario.id,
            "repeat": r.repeat,
            "suite": r.scenario.suite,
            "source": r.scenario.source,
            "attempt_id": r.attempt_id,
            "model": build.subject.model,
            "status": r.call.status,
            "output": r.call.text,
            "policy_failures": r.policy_failures,
            "policy_digest": r.policy_digest,
            "cost_usd": r.call.cost_usd,
            "prompt_tokens": r.call.prompt_tokens,
            "completion_tokens": r.call.completion_tokens,
            "tries": r.call.tries,
            "latency_s": r.call.latency_s,
            "error_kind": r.call.error_kind,
            "error": r.call.error,
            "excluded_reason": r.call.excluded_reason,
            "turns": r.turns,
            "replay_misses": r.replay_misses,
            "trajectory": stored_trajectory(r.trajectory),
            "adaptive_start": None if design is None else design.start,
            "adaptive_maximum": None if design is None else design.maximum,
        }
        for r in results
    ]
    return exclude_stopped_scenarios(rows)


def judge_verdict_rows(
    build_id: str,
    judge: Judge,
    rubric: Rubric,
    results: Sequence[JudgeResult],
    produced: Mapping[tuple[str, int], bool],
) -> list[dict[str, Any]]:
    """The `judge_verdicts` rows of one build under one judge version, the stopped-scenario exclusion
    applied. `produced[(scenario_id, repeat)]`: whether the subject attempt behind a verdict produced
    output (an attempt not listed did not)."""
    rows = []
    for r in results:
        v = r.verdict
        rows.append(
            {
                "build": build_id,
                "judge_version": judge.version_id,
                "scenario_id": r.scenario_id,
                "repeat": r.repeat,
                "attempt_id": attempt_id(build_id, r.scenario_id, r.repeat),
                "rubric": rubric.key,
                "status": r.status,
                "score": v.score if v is not None and v.status == "scored" else None,
                "criteria": json.dumps(v.criteria, sort_keys=True) if v is not None and v.criteria else None,
                "source": "model",
                "failure_reason": r.failure_reason,
                "policy_failures": r.policy_failures,
                "cost_usd": r.cost_usd,
                "tries": r.tries,
                "author": None,
            }
        )
    return exclude_stopped_scenarios(
        rows,
        reason_key="failure_reason",
        has_output=lambda row: produced.get((row["scenario_id"], row["repeat"]), False),
    )


def cost_ledger_rows(journal_rows: Iterable[JournalRow]) -> list[dict[str, Any]]:
    """Journal rows as published to `cost_ledger`, by attempt key (`published_for` comes from the partition)."""
    return [
        {
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
            # reservation to settlement: a local model's compute time (its queue included), a
            # provider's answer time; NULL while the attempt is reserved or was refused
            "call_s": (r.settled_at - r.created_at).total_seconds() if r.settled_at else None,
            "day": r.day,
        }
        for r in sorted(journal_rows, key=lambda r: r.attempt_key)
    ]


CHUNK_ROWS = 2000
"""About how many rows a producer hands the partition writer at a time (a scenario is never split)."""


def scenario_chunks(
    items: Iterable[T],
    scenario_of: Callable[[T], str],
    build_rows: Callable[[list[T]], list[dict[str, Any]]],
    keep: tuple[str, ...],
    kept: list[dict[str, Any]],
    size: int = CHUNK_ROWS,
) -> Iterator[list[dict[str, Any]]]:
    """`items` in (scenario id, repeat) order, in chunks of about `size` that never split a scenario,
    each turned into rows by `build_rows` (a table's one row builder, whose stopped-scenario exclusion
    needs a scenario's attempts together).

    What the materialization's summary needs of each row (the `keep` columns) is appended to `kept`,
    so the full rows are held one chunk at a time.
    """
    chunk: list[T] = []
    for item in items:
        if len(chunk) >= size and scenario_of(item) != scenario_of(chunk[-1]):
            done = build_rows(chunk)
            kept.extend({k: r[k] for k in keep} for r in done)
            yield done
            chunk = []
        chunk.append(item)
    if chunk or not kept:
        done = build_rows(chunk)
        kept.extend({k: r[k] for k in keep} for r in done)
        yield done

"""The capability track's materializations: `materialize_<asset>(track, partition…, run_id) -> Summary`.

Each one is one asset's work (the Dagster assets and the CLI both call these): it runs, writes one
warehouse partition through the one partition writer, and returns a summary of counts for the
materialization's metadata. The release tables' materializations are in `eval_assets.release`, the
suite's in `eval_assets.suite`, the bridge's in `eval_assets.bridge`, the trend's in `eval_assets.trend`.
No Dagster here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

from eval_assets.capability._shards import Block, BlockRun, blocks_of
from eval_assets.capability.errors import RunRefused, TrackError
from eval_assets.capability.progress import Progress, ProgressMeter
from eval_assets.capability.rows import (
    Summary,
    cost_ledger_rows,
    judge_verdict_rows,
    scenario_chunks,
    scenario_run_rows,
)
from eval_assets.capability.track import Log, Track
from eval_assets.config import BuildManifest, Judge, Rubric
from eval_assets.engine import Engine, StoredAttempt
from eval_assets.providers.gateway import UnpricedModel
from eval_assets.tracing import traced

__all__ = [
    "materialize_cost_ledger",
    "materialize_judge_verdicts",
    "materialize_scenario_runs",
    "stored_attempts",
]


@traced(
    "eval.run",
    lambda a: {
        "eval.asset": "scenario_runs",
        "eval.build": a["build_id"],
        "eval.dagster_run_id": a["run_id"],
    },
)
def materialize_scenario_runs(
    track: Track,
    build_id: str,
    run_id: str,
    log: Log | None = None,
    generation: int = 0,
    progress: Callable[[Progress], None] | None = None,
) -> Summary:
    """Run every scenario × repeat for the build's subject and write its `scenario_runs` partition.
    `progress` gets attempts done of planned, errors, spend, rate and time left as blocks come
    back (at most every 5 s, and once at the end).

    Tries already settled in the journal (same generation) are read back, not paid again.
    A scenario any of whose attempts hit a ceiling is excluded as a whole (missing, never zero).
    """
    build = track.build(build_id)
    scenarios = track.scenarios_for(build)
    planned = sum(s.repeats for s in scenarios)
    track.check_plan(build.id, "scenario_runs", planned)
    processes = track.project.settings.engine.worker_count(planned)
    engine = track.engine(run_id, log, processes)
    engine.spend.preflight([build.subject.model])
    by_id = {s.id: s for s in scenarios}
    blocks = [Block(i, ids) for i, ids in enumerate(blocks_of(scenarios, track.block_attempts))]
    with ExitStack() as stack:
        held = stack.enter_context(track.lease(build.id, "scenario_runs", build.id, run_id))
        ahead = _judges_ahead(track, build, engine, stack, run_id, log)
        engine.start_clock()
        run = track.block_run(
            engine,
            blocks,
            lambda b: engine.run_subjects(
                build, [by_id[i] for i in b.scenario_ids], generation, judge_ahead=ahead
            ),
            (run_id, build.id, None, generation),
            processes,
            log,
            ahead,
        )

        meter = ProgressMeter(f"scenario_runs {build.id}", planned, progress) if progress else None
        results = track.block_results(
            run,
            held,
            build.id,
            "scenario_runs",
            planned,
            lambda r: r.call.error_kind == "run_deadline",
            meter,
        )
        rows: list[dict[str, Any]] = []  # what the summary needs of each row written
        path = track.warehouse.write_partition_chunks(
            "scenario_runs",
            {"build": build.id},
            scenario_chunks(
                results,
                lambda r: r.scenario.id,
                lambda chunk: scenario_run_rows(build, chunk),
                ("scenario_id", "status", "policy_failures", "replay_misses", "cost_usd"),
                rows,
            ),
            run_id,
        )
    statuses = [r["status"] for r in rows]
    excluded_scenarios = sorted({r["scenario_id"] for r in rows if r["status"] == "excluded"})
    return Summary(
        {
            "attempts": len(rows),
            "scenarios": len(scenarios),
            "generation": generation,
            "excluded_scenarios": excluded_scenarios,
            "exclusion_rate": round(statuses.count("excluded") / len(rows), 4) if rows else None,
            "ok": statuses.count("ok"),
            "errors": statuses.count("error"),
            "excluded": statuses.count("excluded"),
            "policy_failures": int(sum(r["policy_failures"] for r in rows)),
            # replay loop: tool calls the recordings did not hold, over every attempt
            "replay_misses": int(sum(r["replay_misses"] for r in rows)),
            **_process_values(run, processes),
            "spend_usd": round(sum(r["cost_usd"] for r in rows), 6),
            # judge calls made ahead (engine.judge_ahead): their spend is the judge versions', not here
            "judged_ahead": [j.version_id for j, _ in ahead],
            "judge_calls_ahead": sum(c.judged_ahead for c in run.counters),
            "partition_file": str(path),
        }
    )


def _judges_ahead(
    track: Track, build: BuildManifest, engine: Engine, stack: ExitStack, run_id: str, log: Log | None
) -> list[tuple[Judge, Rubric]]:
    """The judge versions that judge this subject run's attempts ahead (`engine.judge_ahead`): the
    build's (`judges_for`). Each one's `judge_verdicts` lease is held on `stack` for the run, so no
    other run judges the same attempts meanwhile; a version whose lease another run holds, or whose
    model has no known price, is left to its own materialization (logged), never a failure here."""
    if not track.project.settings.engine.judge_ahead:
        return []
    out = []
    for judge in track.judges_for(build):
        try:
            engine.spend.preflight([judge.model])
            stack.enter_context(
                track.lease(build.id, "judge_verdicts", f"{build.id}|{judge.version_id}", run_id)
            )
        except (UnpricedModel, RunRefused) as exc:
            if log:
                log(f"{judge.version_id} does not judge ahead; judge_verdicts will: {exc}")
            continue
        out.append((judge, track.project.rubric_for(judge)))
    return out


def stored_attempts(track: Track, build_id: str) -> list[StoredAttempt]:
    frame = track.warehouse.query(
        # every column: a partition written before `trajectory` existed has none (read as None)
        "SELECT * FROM scenario_runs WHERE build = ? ORDER BY scenario_id, repeat",
        [build_id],
    )
    return [
        StoredAttempt(
            r.scenario_id,
            int(r.repeat),
            r.status,
            r.output if isinstance(r.output, str) else None,
            int(r.policy_failures),
            r.excluded_reason if isinstance(r.excluded_reason, str) else None,
            r.error if isinstance(r.error, str) else None,
            trajectory if isinstance(trajectory := getattr(r, "trajectory", None), str) else None,
        )
        for r in frame.itertuples()
    ]


@traced(
    "eval.run",
    lambda a: {
        "eval.asset": "judge_verdicts",
        "eval.build": a["build_id"],
        "eval.judge": a["judge_version"],
        "eval.dagster_run_id": a["run_id"],
    },
)
def materialize_judge_verdicts(
    track: Track, build_id: str, judge_version: str, run_id: str, log: Log | None = None, generation: int = 0
) -> Summary:
    """Score the build's stored outputs with one judge version; write its `judge_verdicts` partition."""
    build = track.build(build_id)
    judge = track.judge(judge_version)
    rubric = track.project.rubric_for(judge)
    scenarios = {s.id: s for s in track.project.scenarios_for(judge)}
    attempts = stored_attempts(track, build.id)
    if not attempts:
        raise TrackError(f"build {build.id!r} has no scenario_runs yet: materialize scenario_runs first")
    planned = sum(a.scenario_id in scenarios for a in attempts)
    track.check_plan(build.id, f"judge_verdicts [{judge.version_id}]", planned)
    processes = track.project.settings.engine.worker_count(planned)
    engine = track.engine(run_id, log, processes)
    engine.spend.preflight([judge.model])
    partition = f"{build.id}|{judge.version_id}"
    by_scenario: dict[str, list[StoredAttempt]] = {}
    for a in attempts:
        if a.scenario_id in scenarios:
            by_scenario.setdefault(a.scenario_id, []).append(a)
    judged_scenarios = [scenarios[i] for i in sorted(by_scenario)]
    blocks = [
        Block(i, ids, tuple(a for sid in ids for a in by_scenario[sid]))
        for i, ids in enumerate(blocks_of(judged_scenarios, track.block_attempts))
    ]
    produced = {(a.scenario_id, a.repeat): a.output is not None for a in attempts}
    del attempts  # the blocks hold the judged ones
    with track.lease(build.id, "judge_verdicts", partition, run_id) as held:
        engine.start_clock()
        run = track.block_run(
            engine,
            blocks,
            lambda b: engine.judge_attempts(
                build, judge, rubric, {i: scenarios[i] for i in b.scenario_ids}, b.attempts, generation
            ),
            (run_id, build.id, judge.version_id, generation),
            processes,
            log,
        )
        results = track.block_results(
            run,
            held,
            build.id,
            f"judge_verdicts [{judge.version_id}]",
            planned,
            lambda r: "run_deadline" in str(r.failure_reason),
        )
        rows: list[dict[str, Any]] = []  # what the summary needs of each row written
        path = track.warehouse.write_partition_chunks(
            "judge_verdicts",
            {"build": build.id, "judge_version": judge.version_id},
            scenario_chunks(
                results,
                lambda r: r.scenario_id,
                lambda chunk: judge_verdict_rows(build.id, judge, rubric, chunk, produced),
                ("status", "failure_reason", "score", "cost_usd"),
                rows,
            ),
            run_id,
        )
    statuses = [r["status"] for r in rows]
    judged = len(rows) - statuses.count("excluded")
    reasons: dict[str, int] = {}
    for r in rows:
        if r["status"] == "failed":
            key = str(r["failure_reason"]).split(":")[0]
            reasons[key] = reasons.get(key, 0) + 1
    scores = [r["score"] for r in rows if r["score"] is not None]
    return Summary(
        {
            "verdicts": len(rows),
            "scored": statuses.count("scored"),
            "failed": statuses.count("failed"),
            "excluded": statuses.count("excluded"),
            "failure_rate": round(statuses.count("failed") / judged, 4) if judged else None,
            "exclusion_rate": round(statuses.count("excluded") / len(rows), 4) if rows else None,
            "generation": generation,
            "failure_reasons": reasons,
            "mean_score": round(sum(scores) / len(scores), 4) if scores else None,
            **_process_values(run, processes),
            "spend_usd": round(sum(r["cost_usd"] for r in rows), 6),
            "partition_file": str(path),
        }
    )


def materialize_cost_ledger(track: Track, build_id: str, judge_version: str, run_id: str) -> Summary:
    """Publish the journal's rows for this build's subject calls and this judge version's calls."""
    track.build(build_id)
    track.judge(judge_version)
    kept: list[tuple[str, float]] = []  # (status, cost) of each row written: what the summary needs

    def chunks() -> Iterator[list[dict[str, Any]]]:
        for part in track.journal.ledger_rows(build_id, judge_version):
            rows = cost_ledger_rows(part)
            kept.extend((r["status"], float(r["cost_usd"] or 0.0)) for r in rows)
            yield rows

    path = track.warehouse.write_partition_chunks(
        "cost_ledger", {"build": build_id, "published_for": judge_version}, chunks(), run_id
    )
    statuses = [status for status, _ in kept]
    return Summary(
        {
            "rows": len(kept),
            "settled": statuses.count("settled"),
            "failed": statuses.count("failed"),
            "refused": statuses.count("refused"),
            "reserved_unsettled": statuses.count("reserved"),
            "spend_usd": round(sum(cost for _, cost in kept), 6),
            "partition_file": str(path),
        }
    )


def _process_values(run: BlockRun[Any], processes: int) -> dict[str, Any]:
    """A block run's figures for a materialization's summary, its processes' counters summed."""
    return {
        "reused_from_journal": sum(c.reused for c in run.counters),
        "workers": processes,
        "blocks_by_process": [c.blocks for c in run.counters],  # the calling process first
    }

"""The capability track's materializations: `materialize_<asset>(track, partition…, run_id) -> Summary`.

Each one is one asset's work (the Dagster assets and the CLI both call these): it runs, writes one
warehouse partition through the one partition writer, and returns a summary of counts for the
materialization's metadata. The release tables' materializations are in `eval_assets.release`, the
suite's in `eval_assets.suite`, the bridge's in `eval_assets.bridge`, the trend's in `eval_assets.trend`.
No Dagster here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Any

from eval_assets.capability._shards import Block, BlockRun, blocks_of
from eval_assets.capability.errors import RunRefused, TrackError
from eval_assets.capability.looks import LookPlan, adaptive_design, look, plan_run, stored_attempt
from eval_assets.capability.progress import Progress, ProgressMeter
from eval_assets.capability.rows import (
    Summary,
    cost_ledger_rows,
    judge_verdict_rows,
    scenario_chunks,
    scenario_run_rows,
)
from eval_assets.capability.track import Log, Track
from eval_assets.config import BuildManifest, Judge, Rubric, Scenario
from eval_assets.engine import Engine, StoredAttempt, SubjectResult
from eval_assets.providers.gateway import UnpricedModel
from eval_assets.redact import redact
from eval_assets.tracing import traced

__all__ = [
    "materialize_cost_ledger",
    "materialize_judge_verdicts",
    "materialize_scenario_runs",
    "stored_attempts",
]


FAILURE_LINES = 10
"""Distinct attempt failures a run's summary names (each with its first attempt and how many share it)."""


def failure_lines(rows: Sequence[Mapping[str, Any]], limit: int = FAILURE_LINES) -> list[str]:
    """One line per distinct failure of the attempts (error kind and message, or the exclusion's
    reason), naming its first attempt and how many attempts share it; at most `limit` lines, the
    last saying how many more kinds there are. Redacted."""
    groups: dict[str, list[str]] = {}
    for r in rows:
        if r["status"] == "error":
            cause = f"{r['error_kind']}: {r['error']}"
        elif r["status"] == "excluded":
            cause = f"excluded: {r['excluded_reason']}"
        else:
            continue
        groups.setdefault(" ".join(redact(cause).split()), []).append(str(r["attempt_id"]))
    lines = [
        f"{ids[0]}{f' (and {len(ids) - 1} more attempts)' if len(ids) > 1 else ''}: {cause}"
        for cause, ids in groups.items()
    ]
    if len(lines) > limit:
        return [*lines[: limit - 1], f"and {len(lines) - limit + 1} more kinds of failure (scenario_runs)"]
    return lines


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
    plan = plan_run(track, build, scenarios)
    start = plan.start
    # what every row records of the run's design (None: the fixed count), so the report reads it back
    design = None if start is None else adaptive_design(track, scenarios)
    first = scenarios if start is None else [s.model_copy(update={"repeats": start}) for s in scenarios]
    planned = sum(s.repeats for s in scenarios)  # the most a run may pay: the fixed count
    track.check_plan(build.id, "scenario_runs", planned)
    processes = track.project.settings.engine.worker_count(sum(s.repeats for s in first))
    engine = track.engine(run_id, log, processes)
    engine.spend.preflight([build.subject.model])
    runs: list[BlockRun[Any]] = []
    with ExitStack() as stack:
        held = stack.enter_context(track.lease(build.id, "scenario_runs", build.id, run_id))
        ahead = _judges_ahead(track, build, engine, stack, run_id, log)
        engine.start_clock()
        phase = _Phase(track, build, held, generation, ahead, processes, run_id, log, progress, runs)
        if start is None:
            if log and plan.note != "fixed repeats":
                log(plan.note)
            results: Iterator[SubjectResult] = phase.run(engine, scenarios, "scenario_runs")
        else:
            done = list(phase.run(engine, first, "scenario_runs (first look)"))
            # fresh engines from here on: each block run's event loop is closed when it ends
            looking = track.engine(run_id, log, processes)
            looking.start_clock(phase.seconds_left)
            plan = look(track, looking, build, scenarios, done, plan, generation)
            if log:
                log(plan.note)
            topped = [s for s in scenarios if s.id in plan.top_up]
            more: list[SubjectResult] = []
            if topped:
                engine = track.engine(run_id, log, processes)
                engine.start_clock(looking.seconds_left())
                more = list(phase.run(engine, topped, "scenario_runs (top-ups)"))
            by_id = {s.id: s for s in scenarios}
            kept = [
                replace(r, scenario=by_id[r.scenario.id]) for r in done if r.scenario.id not in plan.top_up
            ]
            results = iter(sorted([*kept, *more], key=lambda r: (r.scenario.id, r.repeat)))
        rows: list[dict[str, Any]] = []  # what the summary needs of each row written
        path = track.warehouse.write_partition_chunks(
            "scenario_runs",
            {"build": build.id},
            scenario_chunks(
                results,
                lambda r: r.scenario.id,
                lambda chunk: scenario_run_rows(build, chunk, design),
                (
                    "scenario_id",
                    "repeat",
                    "attempt_id",
                    "status",
                    "error_kind",
                    "error",
                    "excluded_reason",
                    "policy_failures",
                    "replay_misses",
                    "cost_usd",
                ),
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
            "failures": failure_lines(rows),
            "policy_failures": int(sum(r["policy_failures"] for r in rows)),
            # replay loop: tool calls the recordings did not hold, over every attempt
            "replay_misses": int(sum(r["replay_misses"] for r in rows)),
            **_process_values(runs, processes),
            "spend_usd": round(sum(r["cost_usd"] for r in rows), 6),
            # judge calls made ahead (engine.judge_ahead): their spend is the judge versions', not here
            "judged_ahead": [j.version_id for j, _ in ahead],
            "judge_calls_ahead": sum(c.judged_ahead for run in runs for c in run.counters),
            **_adaptive_values(plan, rows, planned),
            "partition_file": str(path),
        }
    )


def _adaptive_values(plan: LookPlan, rows: list[dict[str, Any]], fixed: int) -> dict[str, Any]:
    """The summary's figures on adaptive repeats (none in fixed mode): what the look chose and saved."""
    if plan.note == "fixed repeats":
        return {}
    values: dict[str, Any] = {"adaptive": plan.note, "attempts_fixed_count": fixed}
    if plan.start is not None:
        topped = [r for r in rows if r["repeat"] > plan.start]
        values |= {
            "adaptive_start": plan.start,
            "adaptive_baseline": plan.baseline,
            "topped_up_scenarios": sorted(plan.top_up),
            "top_up_attempts": len(topped),
            "attempts_saved": fixed - len(rows),
            "adaptive_look": plan.per_judge,
        }
    return values


@dataclass
class _Phase:
    """One block run of a subject run's attempts (the whole run, or one phase of adaptive repeats), all
    under the run's lease and deadline; the block runs are kept in `runs` for the summary."""

    track: Track
    build: BuildManifest
    held: Any
    generation: int
    ahead: list[tuple[Judge, Rubric]]
    processes: int
    run_id: str
    log: Log | None
    progress: Callable[[Progress], None] | None
    runs: list[BlockRun[Any]]
    seconds_left: float | None = None

    def run(self, engine: Engine, scenarios: Sequence[Scenario], what: str) -> Iterator[SubjectResult]:
        by_id = {s.id: s for s in scenarios}
        planned = sum(s.repeats for s in scenarios)
        blocks = [Block(i, ids) for i, ids in enumerate(blocks_of(scenarios, self.track.block_attempts))]
        run = self.track.block_run(
            engine,
            blocks,
            lambda b: engine.run_subjects(
                self.build, [by_id[i] for i in b.scenario_ids], self.generation, judge_ahead=self.ahead
            ),
            (self.run_id, self.build.id, None, self.generation),
            self.processes,
            self.log,
            self.ahead,
        )
        self.runs.append(run)
        meter = ProgressMeter(f"{what} {self.build.id}", planned, self.progress) if self.progress else None
        yield from self.track.block_results(
            run,
            self.held,
            self.build.id,
            "scenario_runs",
            planned,
            lambda r: r.call.error_kind == "run_deadline",
            meter,
        )
        self.seconds_left = engine.seconds_left()


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
    rows = track.warehouse.rows(
        "SELECT * FROM scenario_runs WHERE build = ? ORDER BY scenario_id, repeat", [build_id]
    )
    return [stored_attempt(r) for r in rows]


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
    scenarios = {s.id: s for s in track.project.scenarios_judged_by(judge)}
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


def _process_values(runs: BlockRun[Any] | Sequence[BlockRun[Any]], processes: int) -> dict[str, Any]:
    """A materialization's block runs' figures for its summary, their processes' counters summed (a
    subject run with adaptive repeats has two block runs: its blocks are counted per process over both)."""
    every = [runs] if isinstance(runs, BlockRun) else list(runs)
    blocks = [0] * max((len(r.counters) for r in every), default=0)
    for run in every:
        for i, c in enumerate(run.counters):
            blocks[i] += c.blocks
    return {
        "reused_from_journal": sum(c.reused for run in every for c in run.counters),
        "workers": processes,
        "blocks_by_process": blocks,  # the calling process first
    }

"""The capability track as plain operations over the project, EVAL_HOME, the journal and warehouse.

Each public method is one materialization's work (the Dagster assets and the CLI both call these):
it runs, writes one warehouse partition through the one partition writer, and returns a summary of
counts for the materialization's metadata. No Dagster here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from eval_assets.capability._shards import (
    BLOCK_ATTEMPTS,
    Block,
    BlockRun,
    Counters,
    Runner,
    WorkerSetup,
    blocks_of,
    drive,
)
from eval_assets.capability._worker import ceilings, engine_counters, gateway_for, open_runner, run_engine
from eval_assets.capability.builds import Builds, judges_for
from eval_assets.capability.errors import RunBoundExceeded, RunRefused, TrackError
from eval_assets.capability.progress import Progress, ProgressMeter
from eval_assets.capability.rows import (
    Summary,
    cost_ledger_rows,
    exclude_stopped_scenarios,
    judge_verdict_rows,
    scenario_chunks,
    scenario_run_rows,
)
from eval_assets.config import BuildManifest, Judge, Project, Rubric, Scenario
from eval_assets.engine import Engine, StoredAttempt
from eval_assets.home import EvalHome
from eval_assets.providers.gateway import UnpricedModel
from eval_assets.spend import (
    AttemptRef,
    Ceilings,
    HeldLease,
    LeaseHeld,
    LeaseRow,
    SpendJournal,
    hold_lease,
    open_journal,
)
from eval_assets.tracing import carrier, traced
from eval_assets.warehouse import Warehouse

__all__ = [
    "Block",
    "BlockRun",
    "Counters",
    "Log",
    "Runner",
    "WorkerSetup",
    "drive",
    "RunBoundExceeded",
    "RunRefused",
    "Summary",
    "Track",
    "TrackError",
    "exclude_stopped_scenarios",
]

Log = Callable[[str], None]


class Track:
    def __init__(self, project: Project, home: EvalHome, journal_url: str | None = None):
        self.project = project
        self.home = home.ensure()
        self.builds = Builds(project, self.home)
        self.warehouse = Warehouse(home.warehouse)
        self.warehouse.initialise()
        self.journal_url = journal_url or project.settings.spend.journal_url or home.journal_url
        self._journal: SpendJournal | None = None
        self.gateway = gateway_for(project)
        self.clock: Callable[[], float] = time.monotonic  # the run deadline's clock (tests inject one)
        # blocks the calling process runs at a time beside its worker processes (capability/_shards.py);
        # a test sets 0 to have every block run in a worker process
        self.lanes = 2
        self.block_attempts = BLOCK_ATTEMPTS  # about how many attempts a block holds

    @property
    def journal(self) -> SpendJournal:
        if self._journal is None:
            self._journal = open_journal(self.journal_url)
        return self._journal

    # --- builds (the registry: eval_assets.capability.builds) -------------------------------------

    def build_path(self, build_id: str) -> Path:
        return self.builds.path(build_id)

    def register_build(self, path: Path) -> BuildManifest:
        """Validate a manifest and store it under EVAL_HOME/builds (atomic). Raises ConfigError."""
        return self.builds.register(path)

    def registered_builds(self) -> list[str]:
        return self.builds.ids()

    def builds_by_registration(self) -> list[str]:
        """Registered builds, oldest registration first (by when the manifest was stored)."""
        return self.builds.by_registration()

    def build(self, build_id: str) -> BuildManifest:
        """Resolve `build_id` into its manifest (reads and validates the YAML): once per materialization."""
        return self.builds.resolve(build_id)

    def judges_for(self, build: BuildManifest) -> list[Judge]:
        """The judge versions a build is scored by: the manifest's list, else every active version."""
        return judges_for(self.project, build)

    def judge(self, judge_version: str) -> Judge:
        if judge_version not in self.project.judges:
            known = ", ".join(sorted(self.project.judges)) or "none"
            raise TrackError(f"unknown judge version {judge_version!r} (known: {known})")
        return self.project.judges[judge_version]

    def scenarios_for(self, build: BuildManifest) -> list[Scenario]:
        names = {j.name for j in self.judges_for(build)}
        return [s for _, s in sorted(self.project.scenarios.items()) if s.judge in names]

    # --- engine --------------------------------------------------------------------------------

    def ceilings_for(self, ref: AttemptRef) -> Ceilings:
        """The three ceilings that apply to one call (docs/methods.md: spend ceilings)."""
        return ceilings(self.project, ref)

    def next_generation(self, build_id: str) -> int:
        """The generation an explicit fresh run uses: one past every generation the journal has seen."""
        return 1 + max((r.generation for r in self.journal.rows(build=build_id)), default=0)

    def engine(self, run_id: str, log: Log | None = None, processes: int = 1) -> Engine:
        """The run's engine in this process (`processes`: how many share the run's per-model limits)."""
        return run_engine(
            self.project,
            self.home,
            self.journal,
            self.gateway,
            run_id,
            log=log,
            processes=processes,
            clock=self.clock,
        )

    # --- one run per build, asset and partition -------------------------------------

    @contextmanager
    def lease(
        self,
        build_id: str,
        asset: str,
        partition_key: str,
        run_id: str | None,
        *,
        wait: bool = False,
        on_wait: Callable[[LeaseRow], None] | None = None,
    ) -> Iterator[HeldLease]:
        """Hold the journal's lease on (build, asset, partition) for the block (re-entrant in a process).

        Raises RunRefused naming the holder when another run holds it (unless `wait`).
        """
        try:
            with hold_lease(
                self.journal,
                build_id,
                asset,
                partition_key,
                run_id=run_id,
                ttl_s=self.project.settings.bounds.lease_ttl_s,
                wait=wait,
                on_wait=on_wait,
            ) as held:
                yield held
        except LeaseHeld as exc:
            raise RunRefused(
                f"refused: {exc}; nothing was paid. Wait for it with `evaltrack run --wait`, or retry later"
            ) from exc

    def _check_plan(self, build_id: str, what: str, attempts: int) -> None:
        cap = self.project.settings.bounds.max_attempts_per_run
        if attempts > cap:
            raise RunRefused(
                f"refused: {what} of build {build_id} plans {attempts} attempts, above "
                f"bounds.max_attempts_per_run={cap} (evaltrack.yaml); nothing was paid"
            )

    def _check_deadline(self, passed: bool, build_id: str, what: str, done: int, planned: int) -> None:
        if passed:
            raise RunBoundExceeded(
                f"{what} of build {build_id} failed: bounds.run_deadline_s="
                f"{self.project.settings.bounds.run_deadline_s:g} passed with {done} of {planned} attempts "
                "finished; their settled tries stay in the journal and the next run reuses them (never "
                "paid twice); no partition was written"
            )

    # --- the engine calls, in blocks (the same in the calling process and in a worker process) --

    def _block_run(
        self,
        engine: Engine,
        blocks: list[Block],
        local: Callable[[Block], Any],
        run: tuple[str, str, str | None, int],
        processes: int,
        log: Log | None,
        ahead: Sequence[tuple[Judge, Rubric]] = (),
    ) -> BlockRun[Any]:
        """The run's blocks on this process (`local`) and `processes - 1` worker processes (_shards.py),
        which open the same track for `run` = (run id, build id, judge version or None, generation)."""
        run_id, build_id, judge_version, generation = run
        setup = None
        if processes > 1:
            setup = WorkerSetup(
                project=self.project,
                home=self.home.root,
                journal_url=self.journal_url,
                run_id=run_id,
                build_id=build_id,
                judge_version=judge_version,
                generation=generation,
                processes=processes,
                deadline_at=time.monotonic() + engine.seconds_left(),
                judge_ahead=tuple(j.version_id for j, _ in ahead),
                trace_context=tuple(carrier().items()),
            )
        return BlockRun(
            blocks,
            local,
            lambda: engine_counters(engine),
            workers=processes - 1,
            setup=setup,
            open_runner=open_runner,
            lanes=self.lanes,
            log=log,
        )

    def _results(
        self,
        run: BlockRun[Any],
        held: HeldLease,
        build_id: str,
        what: str,
        planned: int,
        unfinished: Callable[[Any], bool],
        meter: ProgressMeter | None = None,
    ) -> Iterator[Any]:
        """The run's results as its blocks come back, in order. Once every block ran, the partition is
        written only if the deadline had not passed and the lease is still held: raising here leaves it
        unwritten (the writer drops what it wrote so far)."""
        finished = 0
        for block in drive(run.results()):
            if meter is not None:
                meter.add((r.call.status, r.call.cost_usd) for r in block)
            for result in block:
                finished += not unfinished(result)
                yield result
        self._check_deadline(any(c.deadline_passed for c in run.counters), build_id, what, finished, planned)
        held.check()

    # --- materializations ----------------------------------------------------------------------

    @traced(
        "eval.run",
        lambda a: {
            "eval.asset": "scenario_runs",
            "eval.build": a["build_id"],
            "eval.dagster_run_id": a["run_id"],
        },
    )
    def run_scenario_runs(
        self,
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
        build = self.build(build_id)
        scenarios = self.scenarios_for(build)
        planned = sum(s.repeats for s in scenarios)
        self._check_plan(build.id, "scenario_runs", planned)
        processes = self.project.settings.engine.worker_count(planned)
        engine = self.engine(run_id, log, processes)
        engine.spend.preflight([build.subject.model])
        by_id = {s.id: s for s in scenarios}
        blocks = [Block(i, ids) for i, ids in enumerate(blocks_of(scenarios, self.block_attempts))]
        with ExitStack() as stack:
            held = stack.enter_context(self.lease(build.id, "scenario_runs", build.id, run_id))
            ahead = self._judges_ahead(build, engine, stack, run_id, log)
            engine.start_clock()
            run = self._block_run(
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
            results = self._results(
                run,
                held,
                build.id,
                "scenario_runs",
                planned,
                lambda r: r.call.error_kind == "run_deadline",
                meter,
            )
            rows: list[dict[str, Any]] = []  # what the summary needs of each row written
            path = self.warehouse.write_partition_chunks(
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
        self, build: BuildManifest, engine: Engine, stack: ExitStack, run_id: str, log: Log | None
    ) -> list[tuple[Judge, Rubric]]:
        """The judge versions that judge this subject run's attempts ahead (`engine.judge_ahead`): the
        build's (`judges_for`). Each one's `judge_verdicts` lease is held on `stack` for the run, so no
        other run judges the same attempts meanwhile; a version whose lease another run holds, or whose
        model has no known price, is left to its own materialization (logged), never a failure here."""
        if not self.project.settings.engine.judge_ahead:
            return []
        out = []
        for judge in self.judges_for(build):
            try:
                engine.spend.preflight([judge.model])
                stack.enter_context(
                    self.lease(build.id, "judge_verdicts", f"{build.id}|{judge.version_id}", run_id)
                )
            except (UnpricedModel, RunRefused) as exc:
                if log:
                    log(f"{judge.version_id} does not judge ahead; judge_verdicts will: {exc}")
                continue
            out.append((judge, self.project.rubric_for(judge)))
        return out

    def stored_attempts(self, build_id: str) -> list[StoredAttempt]:
        frame = self.warehouse.query(
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
    def run_judge_verdicts(
        self, build_id: str, judge_version: str, run_id: str, log: Log | None = None, generation: int = 0
    ) -> Summary:
        """Score the build's stored outputs with one judge version; write its `judge_verdicts` partition."""
        build = self.build(build_id)
        judge = self.judge(judge_version)
        rubric = self.project.rubric_for(judge)
        scenarios = {s.id: s for s in self.project.scenarios_for(judge)}
        attempts = self.stored_attempts(build.id)
        if not attempts:
            raise TrackError(f"build {build.id!r} has no scenario_runs yet: materialize scenario_runs first")
        planned = sum(a.scenario_id in scenarios for a in attempts)
        self._check_plan(build.id, f"judge_verdicts [{judge.version_id}]", planned)
        processes = self.project.settings.engine.worker_count(planned)
        engine = self.engine(run_id, log, processes)
        engine.spend.preflight([judge.model])
        partition = f"{build.id}|{judge.version_id}"
        by_scenario: dict[str, list[StoredAttempt]] = {}
        for a in attempts:
            if a.scenario_id in scenarios:
                by_scenario.setdefault(a.scenario_id, []).append(a)
        judged_scenarios = [scenarios[i] for i in sorted(by_scenario)]
        blocks = [
            Block(i, ids, tuple(a for sid in ids for a in by_scenario[sid]))
            for i, ids in enumerate(blocks_of(judged_scenarios, self.block_attempts))
        ]
        produced = {(a.scenario_id, a.repeat): a.output is not None for a in attempts}
        del attempts  # the blocks hold the judged ones
        with self.lease(build.id, "judge_verdicts", partition, run_id) as held:
            engine.start_clock()
            run = self._block_run(
                engine,
                blocks,
                lambda b: engine.judge_attempts(
                    build, judge, rubric, {i: scenarios[i] for i in b.scenario_ids}, b.attempts, generation
                ),
                (run_id, build.id, judge.version_id, generation),
                processes,
                log,
            )
            results = self._results(
                run,
                held,
                build.id,
                f"judge_verdicts [{judge.version_id}]",
                planned,
                lambda r: "run_deadline" in str(r.failure_reason),
            )
            rows: list[dict[str, Any]] = []  # what the summary needs of each row written
            path = self.warehouse.write_partition_chunks(
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

    def publish_cost_ledger(self, build_id: str, judge_version: str, run_id: str) -> Summary:
        """Publish the journal's rows for this build's subject calls and this judge version's calls."""
        self.build(build_id)
        self.judge(judge_version)
        kept: list[tuple[str, float]] = []  # (status, cost) of each row written: what the summary needs

        def chunks() -> Iterator[list[dict[str, Any]]]:
            for part in self.journal.ledger_rows(build_id, judge_version):
                rows = cost_ledger_rows(part)
                kept.extend((r["status"], float(r["cost_usd"] or 0.0)) for r in rows)
                yield rows

        path = self.warehouse.write_partition_chunks(
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

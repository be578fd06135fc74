"""The capability track over the project, EVAL_HOME, the journal and the warehouse: the build
registry, the run's engine, the leases and the block runs (in this process and in worker processes).

The materializations that use it are `eval_assets.capability.materialize` (and, for the release
tables, `eval_assets.release`). No Dagster here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_assets.capability._shards import (
    BLOCK_ATTEMPTS,
    Block,
    BlockRun,
    Counters,
    Runner,
    WorkerSetup,
    blocks_of,
    drive,
    fork_server_imports,
    start_fork_server,
    worker_main,
)
from eval_assets.capability.builds import Builds, judges_for, scenarios_for
from eval_assets.capability.errors import RunBoundExceeded, RunRefused, TrackError
from eval_assets.capability.progress import ProgressMeter
from eval_assets.config import (
    LOCAL_PROVIDER,
    BuildManifest,
    Judge,
    Project,
    Rubric,
    Scenario,
    project_at,
    project_loaded_once,
)
from eval_assets.home import EvalHome, kept_in_scratch
from eval_assets.redact import set_pii
from eval_assets.spend import (
    AttemptRef,
    Ceilings,
    HeldLease,
    LeaseHeld,
    LeaseRow,
    SpendJournal,
    hold_lease,
    journal_file,
    open_journal,
)
from eval_assets.spend import journal_url as spend_journal_url
from eval_assets.warehouse import Warehouse, open_warehouse

# The engine, the gateway and the row shapes (the statistics) are imported when a run needs them, not
# with the track (litellm only at a model call: providers/_litellm.py): a command that only reads the
# project, the journal database and the warehouse (`evaltrack review ...`) never pays for them.
if TYPE_CHECKING:
    from eval_assets.capability.rows import Summary, exclude_stopped_scenarios
    from eval_assets.engine import Engine
    from eval_assets.providers.gateway import ModelGateway

__all__ = [
    "BLOCK_ATTEMPTS",
    "Block",
    "BlockRun",
    "Counters",
    "Log",
    "Runner",
    "WorkerSetup",
    "blocks_of",
    "drive",
    "worker_main",
    "RunBoundExceeded",
    "RunRefused",
    "Summary",
    "Track",
    "TrackError",
    "exclude_stopped_scenarios",
    "open_track",
    "track_opened_once",
]

Log = Callable[[str], None]


def __getattr__(name: str) -> Any:
    """`Summary` and `exclude_stopped_scenarios`, re-exported from the row shapes on first use."""
    if name in ("Summary", "exclude_stopped_scenarios"):
        from eval_assets.capability import rows

        return getattr(rows, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Track:
    def __init__(self, project: Project, home: EvalHome, journal_url: str | None = None):
        self.project = project
        self.journal_url = spend_journal_url(home.root, project.settings.spend.journal_url, journal_url)
        refused = kept_in_scratch(
            home.root,
            (
                what
                for what, here in (
                    ("the warehouse (set warehouse: {url, catalog})", project.settings.warehouse.url is None),
                    ("the spend journal (set spend.journal_url)", journal_file(self.journal_url) is not None),
                )
                if here
            ),
        )
        if refused:
            raise TrackError(refused)
        self.home = home.ensure()
        self.builds = Builds(project, self.home)
        self.warehouse: Warehouse = open_warehouse(home.warehouse, project.settings.warehouse)
        self.warehouse.initialise()
        self._journal: SpendJournal | None = None
        self._gateway: ModelGateway | None = None
        set_pii(project.settings.redaction.pii)  # the project's `redaction.pii` in force in this process
        self.clock: Callable[[], float] = time.monotonic  # the run deadline's clock (tests inject one)
        # blocks the calling process runs at a time when a run has no worker process
        # (capability/_shards.py); a run with worker processes leaves every block to them
        self.lanes = 2
        self.block_attempts = BLOCK_ATTEMPTS  # about how many attempts a block holds

    @property
    def journal(self) -> SpendJournal:
        if self._journal is None:
            self._journal = open_journal(self.journal_url)
        return self._journal

    @property
    def gateway(self) -> ModelGateway:
        """The gateway with the project's prices and model scripts, built on first use."""
        if self._gateway is None:
            from eval_assets.capability._worker import gateway_for

            self._gateway = gateway_for(self.project, self.home)
        return self._gateway

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
        return scenarios_for(self.project, build)

    # --- engine --------------------------------------------------------------------------------

    def ceilings_for(self, ref: AttemptRef) -> Ceilings:
        """The three ceilings that apply to one call (docs/methods.md: spend ceilings)."""
        from eval_assets.capability._worker import ceilings

        return ceilings(self.project, ref)

    def next_generation(self, build_id: str) -> int:
        """The generation an explicit fresh run uses: one past every generation the journal has seen."""
        return 1 + max((r.generation for r in self.journal.rows(build=build_id)), default=0)

    def engine(self, run_id: str, log: Log | None = None, processes: int = 1) -> Engine:
        """The run's engine in this process (`processes`: how many share the run's per-model limits)."""
        from eval_assets.capability._worker import run_engine

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

    def check_plan(self, build_id: str, what: str, attempts: int) -> None:
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

    def block_run(
        self,
        engine: Engine,
        blocks: list[Block],
        local: Callable[[Block], Any],
        run: tuple[str, str, str | None, int],
        processes: int,
        log: Log | None,
        ahead: Sequence[tuple[Judge, Rubric]] = (),
    ) -> BlockRun[Any]:
        """The run's blocks: with `processes` 1, on this process (`local`, on `lanes` coroutines);
        else on `processes` worker processes (_shards.py), which open the same track for `run` =
        (run id, build id, judge version or None, generation), and none on this process. So the calling
        process of a run with workers calls no model and never imports litellm (~160 MB): the workers
        do, forked from a fork server that imported it once."""
        from eval_assets.capability._worker import engine_counters, open_runner
        from eval_assets.providers.gateway import CALL_MODULES
        from eval_assets.tracing import carrier

        run_id, build_id, judge_version, generation = run
        models = [self.build(build_id).subject.model] if judge_version is None else []
        models += [self.judge(judge_version).model] if judge_version is not None else []
        models += [judge.model for judge, _ in ahead]
        self.serve_local(models)
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
            workers=processes if processes > 1 else 0,
            setup=setup,
            open_runner=open_runner,
            lanes=0 if processes > 1 else self.lanes,
            log=log,
            preload=CALL_MODULES,
        )

    def serve_local(self, models: Sequence[str]) -> None:
        """Start (or find) the servers of the `local/<name>` models among `models` in this process, before
        any worker or call: a model that cannot be served here (no runtime, no verified weights, a server
        that does not come up) refuses the run with one line naming the fix, before anything is paid."""
        from eval_assets.capability._worker import local_servers
        from eval_assets.localmodel import LocalModelError

        names = sorted(
            {m.removeprefix(f"{LOCAL_PROVIDER}/") for m in models if m.startswith(f"{LOCAL_PROVIDER}/")}
        )
        if not names:
            return
        servers = local_servers(self.project, self.home)
        try:
            for name in names:
                servers.check(name)
                servers.route(name)
        except LocalModelError as exc:
            raise RunRefused(f"refused: {exc}; nothing was paid") from exc

    def stop_local(self) -> None:
        """Stop the local model servers this process started for this track (the command's end)."""
        from eval_assets.capability._worker import stop_local_servers

        stop_local_servers(self.project, self.home)

    def start_workers_ahead(self, build: BuildManifest) -> bool:
        """`start_workers_ahead` for this track's project."""
        return start_workers_ahead(self.project, build)

    def block_results(
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


# the track a command opened, by (project root, home, journal URL), while the command's runs go
_COMMAND_TRACKS: dict[tuple[Path, Path, str], Track] = {}


@contextmanager
def track_opened_once(track: Track) -> Iterator[None]:
    """While inside, `open_track` over `track`'s project root, home and journal is `track` as the
    command opened it, and `project_at` its project (`project_loaded_once`): each of a command's runs
    (six for `run`, about twenty for `demo`) shares one track instead of ensuring the home,
    initialising the warehouse and opening the journal's engine again. Runs the daemon or the UI launch
    are outside and open their own."""
    key = (track.project.root.resolve(), track.home.root.resolve(), track.journal_url)
    previous = _COMMAND_TRACKS.get(key)
    _COMMAND_TRACKS[key] = track
    try:
        with project_loaded_once(track.project):
            yield
    finally:
        track.stop_local()  # the command's local model servers end with it
        if previous is None:
            del _COMMAND_TRACKS[key]
        else:
            _COMMAND_TRACKS[key] = previous


def open_track(project_root: Path, home: EvalHome, journal_url: str | None = None) -> Track:
    """The track over the project at `project_root`, `home` and the journal (`journal_url`, else the
    project's or the home's): the command's own (`track_opened_once`) while one is in force, else
    opened now."""
    project = project_at(project_root)
    url = spend_journal_url(home.root, project.settings.spend.journal_url, journal_url)
    held = _COMMAND_TRACKS.get((project.root.resolve(), home.root.resolve(), url))
    return held if held is not None else Track(project, home, journal_url)


def start_workers_ahead(project: Project, build: BuildManifest) -> bool:
    """Start the fork server of this process's block runs now when `build`'s subject run will have
    worker processes (its planned attempts, `engine.workers`): it imports the engine and litellm
    on another core while this process loads the definitions and opens the run,
    instead of while the run waits for its first worker. Needs only the project and the manifest, so
    a command can call it before it opens the warehouse. Returns whether it was started."""
    from eval_assets.capability._worker import open_runner
    from eval_assets.providers.gateway import CALL_MODULES

    attempts = sum(s.repeats for s in scenarios_for(project, build))
    if project.settings.engine.worker_count(attempts) < 2:
        return False
    start_fork_server(fork_server_imports(open_runner, CALL_MODULES))
    return True

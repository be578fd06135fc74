"""A run's engine, and a worker process's side of a block run (`_shards.py`).

`run_engine` builds the engine the track's materializations run on, in the calling process and in a
worker process alike (the calling process's makes calls only in a run without workers: its gateway
imports litellm at its first call). `open_runner` is what a worker process opens: only the build
registry, the spend journal, the gateway and the engine, never the track's warehouse, row shapes or
statistics. The fork server imports this module and the gateway's `CALL_MODULES` (litellm), the
heaviest imports of a run, once per command.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eval_assets.capability._shards import Block, Counters, Runner, WorkerSetup
from eval_assets.capability.builds import Builds
from eval_assets.config import LOCAL_PROVIDER, Project, ScriptBook
from eval_assets.engine import Engine, Limiters, Progress
from eval_assets.home import EvalHome
from eval_assets.localmodel import LocalServers
from eval_assets.providers.gateway import LocalRoutes, ModelGateway, Served
from eval_assets.redact import set_pii
from eval_assets.spend import AttemptRef, Ceilings, SpendJournal, SpendPath, open_journal
from eval_assets.tracing import continued


def gateway_for(project: Project, home: EvalHome | None = None) -> ModelGateway:
    """The gateway with the project's prices, model scripts and (with `home`) local model servers (and
    its `redaction.pii` in force in this process: a worker process applies it too)."""
    set_pii(project.settings.redaction.pii)
    local = None
    if home is not None and project.settings.local_models:
        local = local_routes(project, home)
    return ModelGateway(project.settings.price_table(), scripts=ScriptBook(project.root), local=local)


_LOCAL_SERVERS: dict[tuple[Path, Path], LocalServers] = {}


def local_servers(project: Project, home: EvalHome) -> LocalServers:
    """This process's local model servers of (project, home): one set, whatever opens them."""
    key = (project.root.resolve(), home.root.resolve())
    if key not in _LOCAL_SERVERS:
        _LOCAL_SERVERS[key] = LocalServers(home, project.settings, project.root)
    return _LOCAL_SERVERS[key]


def stop_local_servers(project: Project, home: EvalHome) -> None:
    """Stop the local model servers this process started for (project, home), if any."""
    servers = _LOCAL_SERVERS.get((project.root.resolve(), home.root.resolve()))
    if servers is not None:
        servers.stop_all()


def local_routes(project: Project, home: EvalHome) -> LocalRoutes:
    servers = local_servers(project, home)

    def served(name: str) -> Served:
        route = servers.route(name)
        return Served(route.litellm_model, route.api_base, route.api_key)

    return served


def ceilings(project: Project, ref: AttemptRef) -> Ceilings:
    """The three ceilings that apply to one call (docs/methods.md: spend ceilings)."""
    spend = project.settings.spend
    scenario = project.scenarios.get(ref.scenario_id)
    own = scenario.ceiling_usd if scenario is not None else None
    return Ceilings(
        scenario_usd=own if own is not None else spend.scenario_ceiling_usd,
        suite_usd=spend.suite_ceiling_usd,
        day_usd=spend.day_ceiling_usd,
    )


def run_engine(
    project: Project,
    home: EvalHome,
    journal: SpendJournal,
    gateway: ModelGateway,
    run_id: str,
    *,
    log: Callable[[str], None] | None = None,
    processes: int = 1,
    clock: Callable[[], float] = time.monotonic,
) -> Engine:
    """The run's engine in this process; with `processes` processes on the run, each takes that share
    of the per-model limit (`engine.concurrency_per_model` is the run's, not each process's)."""
    bounds = project.settings.bounds
    settings = project.settings.engine
    if processes > 1:
        share = max(1, settings.concurrency_per_model // processes)
        settings = settings.model_copy(update={"concurrency_per_model": share})
    # a local model's server takes `parallel` calls at once: the rest wait here, not in its queue (where
    # their timeouts would run)
    local_limits = {
        f"{LOCAL_PROVIDER}/{name}": max(1, m.parallel // processes)
        for name, m in project.settings.local_models.items()
    }
    spend = SpendPath(
        journal,
        gateway,
        run_id=run_id,
        ceilings_for=lambda ref: ceilings(project, ref),
        max_output_bytes=bounds.max_output_bytes,
    )
    return Engine(
        spend=spend,
        settings=settings,
        limiters=Limiters(settings.concurrency_per_model, ceilings=local_limits) if local_limits else None,
        jitter=random.Random(),
        progress=Progress(log=log),
        fence_secret=home.fence_secret(),
        bounds=bounds,
        clock=clock,
        agent_search=(str(project.root),),  # an agent entrypoint's module may live in the project
        agent_scratch=str(home.agent_scratch),
    )


def engine_counters(engine: Engine) -> Counters:
    """An engine's counters for its block run (the block run counts the blocks itself)."""
    return Counters(engine.progress.reused, engine.deadline_passed, engine.ahead_progress.done)


class _BlockRunner(Runner[Any]):
    """A worker process's side of a block run: the run's engine opened from the setup; each block is
    the SAME engine call the calling process makes on its blocks when it runs them alone."""

    def __init__(self, setup: WorkerSetup):
        self.setup = setup
        project = setup.project
        home = EvalHome(setup.home)
        self.build = Builds(project, home).resolve(setup.build_id)
        journal = open_journal(setup.journal_url)
        self.engine = run_engine(
            project, home, journal, gateway_for(project, home), setup.run_id, processes=setup.processes
        )
        self.engine.start_clock(setup.deadline_at - time.monotonic())
        self.loop = asyncio.new_event_loop()  # one loop for the worker's life: limits and clients persist
        # subject runs: the judge versions the caller judges ahead with (it holds their leases)
        judges = [project.judges[v] for v in setup.judge_ahead]
        self.ahead = [(j, project.rubric_for(j)) for j in judges]

    def run(self, block: Block) -> list[Any]:
        with continued(dict(self.setup.trace_context)):  # the block's spans join the run's trace
            return self._run(block)

    def _run(self, block: Block) -> list[Any]:
        setup, project, engine = self.setup, self.setup.project, self.engine
        if setup.judge_version is None:
            scenarios = [project.scenarios[i] for i in block.scenario_ids]
            return self.loop.run_until_complete(
                engine.run_subjects(self.build, scenarios, setup.generation, judge_ahead=self.ahead)
            )
        judge = project.judges[setup.judge_version]
        return self.loop.run_until_complete(
            engine.judge_attempts(
                self.build,
                judge,
                project.rubric_for(judge),
                {i: project.scenarios[i] for i in block.scenario_ids},
                list(block.attempts),
                setup.generation,
            )
        )

    def counters(self) -> Counters:
        return engine_counters(self.engine)


def open_runner(setup: WorkerSetup) -> Runner[Any]:
    """A worker process's runner (module level: pickled by reference into the worker)."""
    return _BlockRunner(setup)

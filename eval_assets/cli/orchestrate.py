"""Driving the code location from the command line: materializations on the persistent instance.

`evaltrack run` and `demo` launch ordinary Dagster runs (Dagster's own engine, in process) against
the instance in EVAL_HOME/dagster, so the UI shows every run, materialization and its metadata.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._core.execution.plan.objects import StepFailureData
from dagster._core.instance.ref import InstanceRef
from dagster._core.remote_origin import RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.storage.tags import REPOSITORY_LABEL_TAG
from dagster._core.workspace.load import location_origins_from_yaml_paths
from dagster._utils.error import SerializableErrorInfo

from eval_assets.capability.builds import Builds
from eval_assets.config import Project, project_at
from eval_assets.defs.failures import CAUSES_KEY
from eval_assets.defs.selections import JOB_OF, PER_BUILD_FINAL_ASSETS, PER_BUILD_RUN_ASSETS, PER_JUDGE_ASSETS
from eval_assets.home import EvalHome, operator_instance, project_root
from eval_assets.redact import redact, without_traceback
from eval_assets.spend import pid_alive


@dataclass(frozen=True)
class StepResult:
    partition: str
    assets: tuple[str, ...]
    success: bool
    run_id: str
    error: str | None
    metadata: dict[str, dict[str, Any]]
    seconds: float = 0.0
    job: str = ""
    # release_approval refused a build that may not ship (its decision is not allow): the step did
    # what it is for, so the command does not count it as a failure
    withheld: bool = False
    detail: str | None = None  # a failure's whole error chain with its stacks, redacted (for --debug)


def plain_key(key: str) -> str:
    """A metadata key without the judge-version suffix the UI gets (`verdicts · helpfulness-v1`)."""
    return key.split(" · ", 1)[0]


HOST_TAG, PID_TAG = "evaltrack/host", "evaltrack/pid"


# The runs this process executes in process do not capture its stdout and stderr into per-run files:
# the command prints its own lines to the terminal, and every event is in the run's event log. Dagster's
# local capture starts a `tail -F` and a watcher interpreter for each run and stops them after it, and
# a demo launches about twenty runs. Runs the daemon or the UI launch read dagster.yaml as it
# is and keep their compute logs; an operator's instance is never changed.
_NO_COMPUTE_LOGS = {
    "module": "dagster._core.storage.noop_compute_log_manager",
    "class": "NoOpComputeLogManager",
}


def instance_for(home: EvalHome, project: Project | None = None) -> dg.DagsterInstance:
    """The instance an operator configured at $DAGSTER_HOME (`home.operator_instance`: a dagster.yaml
    eval-track did not write, e.g. the Helm chart's), used as it is; else the one in EVAL_HOME/dagster,
    its dagster.yaml written from evaltrack.yaml's `instance:` (of `project`, else of the project at
    EVAL_PROJECT_ROOT: the command's own while one is in force, `project_loaded_once`). Either way its
    provider pools' limits are set."""
    if project is None:
        project = project_at(project_root())
    settings = project.settings.instance
    configured = operator_instance()
    overrides = {}
    if configured is None:
        home.ensure(settings)
        configured, overrides = home.dagster, {"compute_logs": _NO_COMPUTE_LOGS}
    else:
        home.ensure()
    os.environ["DAGSTER_HOME"] = str(configured)
    # what DagsterInstance.from_config does, with this process's overrides of the file
    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(configured), overrides=overrides))
    set_pool_limits(instance, settings.pool_limits(project.asset_pools().values()))
    fail_orphaned_runs(instance)
    return instance


def set_pool_limits(instance: dg.DagsterInstance, limits: dict[str, int]) -> None:
    """Set each named pool's limit (only a changed one is written); other pools keep the default."""
    storage = instance.event_log_storage
    if not limits or not storage.supports_global_concurrency_limits:
        return
    for pool, limit in sorted(limits.items()):
        if storage.get_concurrency_info(pool).slot_count != limit:
            storage.set_concurrency_slots(pool, limit)


def fail_orphaned_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark failed every STARTING/STARTED run of an `evaltrack` process on this host that no longer
    exists (killed with kill -9 mid-run); returns their run ids. Runs the daemon launched are left to
    Dagster's run monitoring (dagster.yaml)."""
    host = socket.gethostname()
    failed = []
    records = instance.get_run_records(
        dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING])
    )
    for record in records:
        run = record.dagster_run
        pid = run.tags.get(PID_TAG, "")
        if (
            run.tags.get(HOST_TAG) != host
            or not pid.isdigit()
            or int(pid) == os.getpid()
            or pid_alive(int(pid))
        ):
            continue
        instance.report_run_failed(
            run, f"the evaltrack process {pid} running it on {host} exited without finishing it (killed?)"
        )
        failed.append(run.run_id)
    return failed


REPOSITORY = "__repository__"  # the name Dagster gives the repository of a `@dg.definitions` location
# the location `evaltrack init` writes, shipped in the package: the origin of a project without its own
SHIPPED_WORKSPACE = Path(__file__).with_name("project_template") / "workspace.yaml"


def job_origin(job_name: str) -> RemoteJobOrigin:
    """The origin the UI gives a run of `job_name` launched from its code location (workspace.yaml's
    `eval_track`): a run carrying it shows on the location's Overview, job pages and timeline."""
    workspace = project_root() / "workspace.yaml"
    if not workspace.is_file():  # a project without one (an installed package's own root has none)
        workspace = SHIPPED_WORKSPACE
    [location] = location_origins_from_yaml_paths([str(workspace)])
    return RemoteJobOrigin(RemoteRepositoryOrigin(location, REPOSITORY), job_name)


_LOADED: dict[tuple[str, ...], dg.Definitions] = {}


def load_definitions(home: EvalHome) -> dg.Definitions:
    """The code location over `home` and the command's project (`project_loaded_once`; else the one at
    EVAL_PROJECT_ROOT), built once per process for the same home, project and environment (a command
    materializes up to ~20 runs, each of which would build them again)."""
    # the whole code location (the engine, the statistics, the warehouse; litellm is not among them)
    # only when a command materializes: `ui` imports this module to
    # open the instance and add the registered builds' partitions
    from eval_assets.definitions import location

    root = project_root()
    key = (str(home.root), str(root), *(os.environ.get(n, "") for n in _DEFINITIONS_READ))
    if key not in _LOADED:
        _LOADED[key] = location(project_at(root), home)
    return _LOADED[key]


# the environment variables the definitions read when built, besides the home and the project root
_DEFINITIONS_READ = ("EVAL_NOTIFY_WEBHOOK", "DAGSTER_HOME", "EVAL_DAGSTER_STORAGE", "EVAL_DAGSTER_PG_URL")


def _launch(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    assets: Sequence[str],
    partition_key: str | dg.MultiPartitionKey | None,
    tags: dict[str, str] | None = None,
) -> StepResult:
    [job_name] = {JOB_OF[a] for a in assets}
    job = defs.resolve_job_def(job_name)
    origin = job_origin(job_name)
    started = time.monotonic()
    result = job.execute_in_process(
        instance=instance,
        partition_key=partition_key,
        asset_selection=[dg.AssetKey(a) for a in assets],
        raise_on_error=False,
        tags={
            **(tags or {}),
            HOST_TAG: socket.gethostname(),
            PID_TAG: str(os.getpid()),
            # the location's label from the start, so the run lists under the location while it runs
            REPOSITORY_LABEL_TAG: origin.repository_origin.get_label(),
        },
        # the CLI prints its own progress lines, tables and one line per failure; Dagster's console log
        # would print each failure with its stack frames, so it shows only CRITICAL
        # (not release_approval's refusal of a build that may not ship: that is its answer, printed
        # as the step's line; the run page keeps it)
        run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}},
    )
    # and its origin in the run's record (what Dagster itself stores for a run launched from the UI)
    instance.run_storage.replace_job_origin(result.dagster_run, origin)
    error, withheld, detail = None, False, None
    if not result.success:
        failures = [e for e in result.all_events if e.is_step_failure]
        withheld = bool(failures) and all(_not_approved(e) for e in failures)
        data = [e.step_failure_data for e in failures if e.step_failure_data is not None]
        error = redact("; ".join(failure_line(d) for d in data) or "run failed")
        detail = redact("\n".join(failure_detail(d) for d in data)) or None
    metadata = {}
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        metadata[mat.asset_key.to_user_string()] = {plain_key(k): v.value for k, v in mat.metadata.items()}
    if result.success and "release_approval" in assets and "release_approval" not in metadata:
        withheld = True  # none or investigate, never approved: nothing materialized, nothing blocked
    return StepResult(
        "" if partition_key is None else str(partition_key),
        tuple(assets),
        result.success,
        result.run_id,
        error,
        metadata,
        round(time.monotonic() - started, 1),
        job_name,
        withheld,
        detail,
    )


def failure_line(data: StepFailureData) -> str:
    """A failed step's one line: the root cause its asset stored (`defs.failures`), else the
    innermost cause of the error Dagster stored."""
    user = data.user_failure_data
    if user is not None and user.description:
        return " ".join(user.description.split())
    return root_cause(data.error) if data.error is not None else "the step failed"


def failure_detail(data: StepFailureData) -> str:
    """A failed step's detail for `--debug`: its cause chain, one line per exception, no frames."""
    user = data.user_failure_data
    causes = user.metadata.get(CAUSES_KEY) if user is not None else None
    chain = str(causes.value) if causes is not None else failure_line(data)
    # the id Dagster's stored message names for the error it masked
    masked = _ERROR_ID.search(data.error.message) if data.error is not None else None
    return f"error ID {masked.group(1)}:\n{chain}" if masked else chain


_ERROR_ID = re.compile(r"error ID ([0-9a-f-]{36})", re.IGNORECASE)


def root_cause(error: SerializableErrorInfo) -> str:
    """The innermost cause of a step's error, one line: `Name: message` (the exception's own class
    name, not Dagster's wrapper of it, never a stack frame)."""
    while error.cause is not None:
        error = error.cause
    text = " ".join(without_traceback(error.message).split())
    qualified, sep, rest = text.partition(": ")
    if sep and qualified.rsplit(".", 1)[-1] == error.cls_name:
        text = f"{error.cls_name}: {rest}"
    return text


def _not_approved(event: dg.DagsterEvent) -> bool:
    """A step failure that is release_approval refusing a build whose decision is not allow."""
    data = event.step_failure_data
    user = data.user_failure_data if data is not None else None
    approved = user.metadata.get("approved") if user is not None else None
    return event.step_key == "release_approval" and approved is not None and approved.value is False


def add_build_partitions(instance: dg.DagsterInstance, build_ids: Sequence[str]) -> list[str]:
    """Add the `build` partition of each of `build_ids` that the instance lacks; returns those added.
    `build add` only stores the manifest (it never imports Dagster): a command adds the partitions
    of the builds it opens the instance for, as `build_sensor` does in the daemon."""
    known = set(instance.get_dynamic_partitions("build"))
    new = [b for b in dict.fromkeys(build_ids) if b not in known]
    if new:
        instance.add_dynamic_partitions("build", new)
    return new


def add_registered_build_partitions(
    home: EvalHome, project: Project, warn: Callable[[str], None]
) -> list[str]:
    """Open the instance and add the partition of every registered build whose manifest loads (a
    manifest that no longer does is skipped with its reason, `warn`, as build_sensor skips it);
    returns the builds added."""
    return add_build_partitions(instance_for(home, project), Builds(project, home).loadable(warn))


def launch_build(
    home: EvalHome,
    build_id: str,
    judge_versions: Sequence[str],
    *,
    on_step: Callable[[StepResult], None] | None = None,
    tags: dict[str, str] | None = None,
) -> list[StepResult]:
    """Materialize one build in graph order: scenario_runs; per judge version verdicts, ledger, noise
    band and report; then the release decision and its approval (fails, `withheld`, unless allow).
    The release board is drawn once per command, after its builds (`launch_board`).

    Stops at the first step that failed to materialize (later steps would only fail on its missing
    output); a deterministic suite that materialized but failed its blocking gate check goes on to
    the decision, which then blocks.
    """
    instance = instance_for(home)
    defs = load_definitions(home)
    add_build_partitions(instance, [build_id])
    steps: list[tuple[list[str], str | dg.MultiPartitionKey | None]] = [
        (list(PER_BUILD_RUN_ASSETS), build_id)
    ]
    for jv in judge_versions:
        steps.append((list(PER_JUDGE_ASSETS), dg.MultiPartitionKey({"build": build_id, "judge_version": jv})))
    steps += [([asset], build_id) for asset in PER_BUILD_FINAL_ASSETS]
    results = []
    for assets, key in steps:
        step = _launch(defs, instance, assets, key, tags)
        results.append(step)
        if on_step:
            on_step(step)
        # a materialized suite whose blocking gate check failed is evidence, not a reason to stop:
        # the decision (its own run, as the automation daemon would launch it) must still say block
        if not step.success and not step.withheld and not set(step.assets) <= set(step.metadata):
            break
    return results


def launch_board(home: EvalHome) -> StepResult:
    """Draw the release board over every registered build (`release_board`, unpartitioned)."""
    return _launch(load_definitions(home), instance_for(home), ["release_board"], None)


def launch_trends(home: EvalHome, judge_versions: Sequence[str]) -> list[StepResult]:
    """Draw the score trend of each judge version over every registered build (`score_trend`)."""
    instance = instance_for(home)
    defs = load_definitions(home)
    return [_launch(defs, instance, ["score_trend"], jv) for jv in judge_versions]


def launch_bridge(home: EvalHome, judge_version: str, builds: Sequence[str] = ()) -> StepResult:
    """A bridge run into `judge_version` (`calibration_offsets`), over `builds` when given."""
    from eval_assets.bridge import BRIDGE_BUILDS_TAG  # the track's stack, imported by load_definitions anyway

    tags = {BRIDGE_BUILDS_TAG: ",".join(builds)} if builds else None
    return _launch(load_definitions(home), instance_for(home), ["calibration_offsets"], judge_version, tags)

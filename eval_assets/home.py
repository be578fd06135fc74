"""EVAL_HOME: the one directory holding all runtime state (git-ignored)."""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eval_assets.safe_write import check_target, write_file

if TYPE_CHECKING:
    from eval_assets.config import InstanceSettings

PROJECT_ROOT = Path(__file__).resolve().parents[1]
FENCE_SECRET_FILE = "fence.secret"
FENCE_SECRET_ENV = "EVAL_FENCE_SECRET"  # a deployment's one secret for every pod (docs/deploy.md)
SCRATCH_ENV = "EVAL_HOME_SCRATCH"  # "1": EVAL_HOME is thrown away with its pod (docs/deploy.md)
FENCE_SECRET_BYTES = 32

_WRITTEN_BY = "# Written by eval-track."
_TEMPLATE = "# Written by eval-track. Instance template 2."
STORAGE_ENV = "EVAL_DAGSTER_STORAGE"
"""`sqlite` or `postgres`: overrides `instance.storage` of evaltrack.yaml for this environment."""

_HEAD = """\
{template} Local instance for `evaltrack demo`, `run` and `ui`.
telemetry:
  enabled: false
nux:
  enabled: false
"""
_STORAGE_POSTGRES = """\
# Run, event log and schedule storage on PostgreSQL. The URL (credentials included) is read from the
# environment when the instance loads; it is never written here.
storage:
  postgres:
    postgres_url:
      env: {url_env}
"""
_TAIL = """\
# Runs the daemon launches (sensors, automation, schedules, the UI) wait in the queued run coordinator;
# at most `max_concurrent_runs` run at once (evaltrack.yaml `instance:`).
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
# Concurrency pools, one per model provider (`llm/<provider>`): scenario_runs, judge_verdicts and
# calibration_offsets each join their provider's pool, so the builds of parallel runs share a
# provider's limit. A pool evaltrack.yaml names gets its own limit (set when an evaltrack command
# opens the instance); any other pool has `default_limit`.
concurrency:
  runs:
    max_concurrent_runs: {max_runs}
  pools:
    granularity: op
    default_limit: {pool_limit}
# Run monitoring (the daemon of `evaltrack ui` runs it): a run whose worker never starts, or that
# outlives a `dagster/max_runtime` tag, is marked failed instead of staying STARTING/STARTED forever.
# Runs of `evaltrack run`/`demo` execute in the CLI's process: one killed with kill -9 is marked
# failed by the next `evaltrack` command on this host (eval_assets.cli.orchestrate.fail_orphaned_runs).
run_monitoring:
  enabled: true
  start_timeout_seconds: 180
  cancel_timeout_seconds: 180
  max_resume_run_attempts: 0
  poll_interval_seconds: 30
# a loaded machine can take minutes to import the code location; Dagster's default gives up after 180 s
code_servers:
  local_startup_timeout: 900
"""


PG_SCHEMES = frozenset({"postgresql+psycopg2"})
"""The instance's PostgreSQL URL scheme: dagster-postgres speaks psycopg2 (its `NOTIFY run_events, %s`
fails under psycopg 3's server-side parameters, which SQLAlchemy 2.1 uses for a bare postgresql://)."""


class InstanceStorageError(ValueError):
    """The instance cannot be configured as asked (names the setting or variable, never a URL)."""


def instance_storage(
    instance: InstanceSettings | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """`sqlite` or `postgres`: $EVAL_DAGSTER_STORAGE when set, else evaltrack.yaml's `instance.storage`."""
    env = os.environ if environ is None else environ
    chosen = env.get(STORAGE_ENV) or (instance.storage if instance is not None else "sqlite")
    if chosen not in ("sqlite", "postgres"):
        raise InstanceStorageError(f"{STORAGE_ENV}={chosen!r}: expected sqlite or postgres")
    return chosen


def dagster_yaml(instance: InstanceSettings | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The instance's dagster.yaml for these settings (defaults: SQLite, 4 runs, pools of 2).

    PostgreSQL needs its URL in the variable `instance.url_env` names; without it this refuses
    (InstanceStorageError naming the variable) instead of falling back to SQLite.
    """
    env = os.environ if environ is None else environ
    text = _HEAD.format(template=_TEMPLATE)
    if instance_storage(instance, env) == "postgres":
        url_env = instance.url_env if instance is not None else "EVAL_DAGSTER_PG_URL"
        if not env.get(url_env):
            raise InstanceStorageError(
                f"the Dagster instance is set to PostgreSQL (instance.storage or {STORAGE_ENV}) but "
                f"${url_env} is not set: export the URL (postgresql+psycopg2://USER:<password>@HOST:PORT/DB) there"
            )
        scheme = env[url_env].partition("://")[0]
        if scheme not in PG_SCHEMES:
            raise InstanceStorageError(
                f"${url_env} must start with postgresql+psycopg2:// (it starts with {scheme[:40]!r}://): "
                f"dagster-postgres needs psycopg2, and SQLAlchemy picks psycopg 3 for a bare postgresql://"
            )
        text += _STORAGE_POSTGRES.format(url_env=url_env)
    max_runs = instance.max_concurrent_runs if instance is not None else 4
    pool_limit = instance.pools.default_limit if instance is not None else 2
    return text + _TAIL.format(max_runs=max_runs, pool_limit=pool_limit)


DAGSTER_YAML = dagster_yaml(environ={})
"""The default instance file (SQLite)."""


def operator_instance(environ: Mapping[str, str] | None = None) -> Path | None:
    """The Dagster instance an operator configured, if any: `$DAGSTER_HOME` when it holds a
    `dagster.yaml` that eval-track did not write (a Helm chart's instance ConfigMap mounted there, or a
    file managed by hand). Commands then open that instance and write no instance file of their own;
    None: they use EVAL_HOME/dagster, written from evaltrack.yaml's `instance:`."""
    env = os.environ if environ is None else environ
    raw = env.get("DAGSTER_HOME")
    if not raw:
        return None
    cfg = Path(raw) / "dagster.yaml"
    try:
        text = cfg.read_text()
    except OSError:
        return None
    return None if text.startswith(_WRITTEN_BY) else Path(raw).resolve()


@contextlib.contextmanager
def environment(values: Mapping[str, str], restore: Iterable[str] = ()) -> Iterator[None]:
    """Set these environment variables for the block, then put each back (or remove it), along with
    any variable named in `restore` that the block itself may set (e.g. DAGSTER_HOME)."""
    saved = {name: os.environ.get(name) for name in [*values, *restore]}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


PROJECT_FILE = "evaltrack.yaml"
HOME_DIR = ".eval_home"


class NoProjectFound(ValueError):
    """No `evaltrack.yaml` in the directory a command starts from or any parent, and no --project."""


def find_project(start: Path | None = None) -> Path:
    """The project a command stands in, found as git and pytest find theirs: the nearest directory from
    `start` (default: the current directory) upward holding `evaltrack.yaml`. The installed package's
    own directory is never one (a wheel's site-packages is no one's project).

    Raises NoProjectFound naming where the search started."""
    here = (start or Path.cwd()).resolve()
    package = Path(__file__).resolve().parent
    for candidate in (here, *here.parents):
        installed_in = candidate == package.parent and not (candidate / "pyproject.toml").is_file()
        if candidate == package or installed_in:  # the package itself, or the site-packages holding it
            continue
        if (candidate / PROJECT_FILE).is_file():
            return candidate
    raise NoProjectFound(
        f"{here}: no {PROJECT_FILE} here or in any parent directory: stand in a project, pass "
        f"--project DIR, or make one with `evaltrack init DIR`"
    )


def project_root() -> Path:
    """$EVAL_PROJECT_ROOT when set (a command sets it for the code location it loads), else the
    project found from the current directory (`find_project`)."""
    given = os.environ.get("EVAL_PROJECT_ROOT")
    return Path(given).resolve() if given else find_project()


def default_home(project: Path | None = None) -> Path:
    """$EVAL_HOME when set, else `<project>/.eval_home` (the project: `project_root()` when not given)."""
    given = os.environ.get("EVAL_HOME")
    if given:
        return Path(given).resolve()
    return ((project or project_root()) / HOME_DIR).resolve()


def scratch_home() -> bool:
    """Whether EVAL_HOME is marked scratch (`EVAL_HOME_SCRATCH=1`, a pod's emptyDir): then nothing that
    must outlive the pod (warehouse, spend journal, build registry) may be kept in it."""
    return os.environ.get(SCRATCH_ENV) == "1"


def kept_in_scratch(root: Path, kept: Iterable[str]) -> str | None:
    """Why the home at `root` may not hold `kept` (what must outlive the pod, each with the setting
    that moves it out) when it is scratch; None when it is not, or nothing is kept in it."""
    named = list(kept)
    if not scratch_home() or not named:
        return None
    return (
        f"{SCRATCH_ENV}=1: EVAL_HOME {root} is thrown away with its pod, yet {' and '.join(named)} "
        "would be kept in it (evaltrack.yaml; docs/deploy.md)"
    )


@dataclass(frozen=True)
class EvalHome:
    root: Path

    @property
    def dagster(self) -> Path:
        return self.root / "dagster"

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    @property
    def builds(self) -> Path:
        return self.root / "builds"

    def reports(self, build: str) -> Path:
        """A build's report page and plots (`reports/<build>/`; not created here)."""
        return self.root / "reports" / build

    @property
    def trend_reports(self) -> Path:
        """The score-trend plots (`reports/trend/`: `trend` is a reserved id, never a build's)."""
        return self.root / "reports" / "trend"

    @property
    def agent_scratch(self) -> Path:
        """Where entry-point agent workers write their results (`tmp/agents/`; a killed run's are
        removed by the next attempt, `engine._agent`)."""
        return self.root / "tmp" / "agents"

    @property
    def logs(self) -> Path:
        """The home's logs: the debug log, the local model servers' output (`logs/`)."""
        return self.root / "logs"

    @property
    def models(self) -> Path:
        """The verified local model weights, unless `local_model_cache` names another place (`models/`)."""
        return self.root / "models"

    @property
    def local_model_state(self) -> Path:
        """The running local model servers' state and lock files (`local-models/`)."""
        return self.root / "local-models"

    @property
    def block_notices(self) -> Path:
        """The JSONL sink of release-block notices (`notifications/release_blocks.jsonl`)."""
        return self.root / "notifications" / "release_blocks.jsonl"

    @property
    def hypothesis(self) -> Path:
        """Hypothesis's caches for property gates (`hypothesis/`: never `./.hypothesis` of a checkout)."""
        return self.root / "hypothesis"

    @property
    def no_network_record(self) -> Path:
        """The record of the suite's last run with no network (`ci/suite-no-network.json`)."""
        return self.root / "ci" / "suite-no-network.json"

    @property
    def debug_log(self) -> Path:
        """Where a failure's full detail is appended, redacted: `--debug`'s, and every error Dagster
        masked in a process of the code location (`defs/failures.py`)."""
        return self.logs / "debug.log"

    def append_debug(self, heading: str, lines: Iterable[str]) -> Path:
        """Append `heading` and `lines` (already redacted) to the debug log; returns its path. Raises
        OSError when it cannot be written (`UnsafeTarget`: a FIFO or a symlink where the log should be)."""
        log = self.debug_log
        log.parent.mkdir(parents=True, exist_ok=True)
        check_target(log)  # appending to a FIFO would block, to a symlink write elsewhere
        with log.open("a", encoding="utf-8") as out:
            out.write("\n".join([heading, *lines]) + "\n")
        return log

    def ensure(self, instance: InstanceSettings | None = None) -> EvalHome:
        """Create the layout and `dagster/dagster.yaml` (telemetry off). Idempotent.

        Without `instance` settings a missing file, or one of an older eval-track template, gets the
        default (SQLite) file and a current one is left as it is; with them (what an `evaltrack`
        command that opens the instance passes) eval-track's file is rewritten to match. A file
        someone wrote themselves is theirs either way.
        """
        for d in (self.dagster, self.warehouse, self.builds):
            d.mkdir(parents=True, exist_ok=True)
        cfg = self.dagster / "dagster.yaml"
        current = cfg.read_text() if cfg.exists() else None
        if current is not None and not current.startswith(_WRITTEN_BY):
            return self
        if instance is None:
            if current is not None and current.startswith(_TEMPLATE):
                return self
            wanted = DAGSTER_YAML
        else:
            wanted = dagster_yaml(instance)
        if current != wanted:
            write_file(cfg, wanted)
        return self

    @property
    def fence_secret_path(self) -> Path:
        return self.root / FENCE_SECRET_FILE

    def fence_secret(self) -> bytes:
        """This home's fence secret (judging.fence_nonce): `EVAL_FENCE_SECRET` (64 hex digits) when it
        is set, so pods without a shared volume render the same prompts; else made once: 32 random
        bytes in `fence.secret`, mode 0600, published with a hard link (two processes starting at
        once agree on one).

        Raises ValueError naming the variable or the file when it is not such a secret (the value is
        never shown).
        """
        given = os.environ.get(FENCE_SECRET_ENV)
        if given is not None:
            try:
                secret = bytes.fromhex(given.strip())
            except ValueError:
                secret = b""
            if len(secret) != FENCE_SECRET_BYTES:
                raise ValueError(
                    f"{FENCE_SECRET_ENV}: fence secret: expected {2 * FENCE_SECRET_BYTES} hex digits "
                    f"(make one with `python -c 'import secrets; print(secrets.token_hex(32))'`)"
                )
            return secret
        if scratch_home():  # a secret made in a pod's own home would differ from every other pod's
            raise ValueError(
                f"{FENCE_SECRET_ENV} is not set, and EVAL_HOME {self.root} is scratch ({SCRATCH_ENV}=1): "
                "every pod must render the same judge prompts (docs/deploy.md)"
            )
        path = self.fence_secret_path
        if not path.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".fence.", dir=self.root)  # mode 0600
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(secrets.token_bytes(FENCE_SECRET_BYTES).hex().encode())
                    out.flush()
                    os.fsync(out.fileno())
                with contextlib.suppress(FileExistsError):  # another process made it first: use theirs
                    os.link(tmp, path)
            finally:
                os.unlink(tmp)
        check_target(path)  # reading a FIFO would block
        text = path.read_bytes()
        try:
            secret = bytes.fromhex(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            secret = b""
        if len(secret) != FENCE_SECRET_BYTES:
            raise ValueError(
                f"{path}: fence secret: expected {2 * FENCE_SECRET_BYTES} hex digits "
                f"(delete the file to make a new one; prompts of earlier runs then render differently)"
            )
        return secret

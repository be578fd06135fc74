"""The Dagster instance file eval-track writes (storage, queued runs, provider pools) and the pools the
model-calling assets join. The PostgreSQL instance end to end is tests/test_e2e_daemon.py."""

from __future__ import annotations

import dataclasses
import secrets
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.instance.config import dagster_instance_config
from dagster._core.storage.local_compute_log_manager import LocalComputeLogManager
from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager

from eval_assets.cli.orchestrate import instance_for, launch_board
from eval_assets.config import InstanceSettings, Pools, Project
from eval_assets.definitions import location
from eval_assets.home import (
    DAGSTER_YAML,
    STORAGE_ENV,
    EvalHome,
    InstanceStorageError,
    dagster_yaml,
    operator_instance,
)

PASSWORD = secrets.token_urlsafe(12)  # a fresh fake password: no tracked line holds a credential
URL = "postgresql+psycopg2://evaltrack:" + PASSWORD + "@db.internal:5432/dagster"  # built from parts


def _validated(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    (tmp_path / "dagster.yaml").write_text(text)
    monkeypatch.setenv("EVAL_DAGSTER_PG_URL", URL)
    config, _ = dagster_instance_config(str(tmp_path))
    return dict(config)


def test_the_default_instance_is_sqlite_with_queued_runs_and_pools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _validated(tmp_path, DAGSTER_YAML, monkeypatch)
    assert "storage" not in config  # Dagster's default: SQLite under DAGSTER_HOME
    assert config["run_coordinator"]["class"] == "QueuedRunCoordinator"
    assert config["concurrency"] == {"runs": {"max_concurrent_runs": 4}, "pools": {"granularity": "op", "default_limit": 2}}
    assert config["telemetry"] == {"enabled": False}


def test_postgres_storage_names_the_variable_never_the_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = InstanceSettings(storage="postgres", max_concurrent_runs=7, pools=Pools(default_limit=3))
    text = dagster_yaml(settings, {"EVAL_DAGSTER_PG_URL": URL})
    assert URL not in text and PASSWORD not in text
    config = _validated(tmp_path, text, monkeypatch)
    assert config["storage"] == {"postgres": {"postgres_url": {"env": "EVAL_DAGSTER_PG_URL"}}}
    assert config["concurrency"]["runs"] == {"max_concurrent_runs": 7}
    assert config["concurrency"]["pools"]["default_limit"] == 3


def test_postgres_without_its_url_is_refused_naming_the_variable() -> None:
    settings = InstanceSettings(storage="postgres", url_env="MY_PG_URL")
    with pytest.raises(InstanceStorageError, match=r"\$MY_PG_URL is not set"):
        dagster_yaml(settings, {})
    with pytest.raises(InstanceStorageError, match="EVAL_DAGSTER_PG_URL"):
        dagster_yaml(None, {STORAGE_ENV: "postgres"})  # the environment asks for it, no URL given


def test_a_url_dagster_postgres_cannot_use_is_refused_without_showing_it() -> None:
    bare = "postgresql://evaltrack:" + PASSWORD + "@db.internal:5432/dagster"  # SQLAlchemy 2.1: psycopg 3
    with pytest.raises(InstanceStorageError, match=r"postgresql\+psycopg2://") as refused:
        dagster_yaml(InstanceSettings(storage="postgres"), {"EVAL_DAGSTER_PG_URL": bare})
    assert PASSWORD not in str(refused.value)


def test_the_environment_overrides_the_storage_and_a_bad_value_is_refused() -> None:
    assert "postgres_url" in dagster_yaml(None, {STORAGE_ENV: "postgres", "EVAL_DAGSTER_PG_URL": URL})
    assert "postgres" not in dagster_yaml(InstanceSettings(storage="postgres"), {STORAGE_ENV: "sqlite"})
    with pytest.raises(InstanceStorageError, match="expected sqlite or postgres"):
        dagster_yaml(None, {STORAGE_ENV: "mysql"})


def test_ensure_keeps_a_users_file_upgrades_an_old_template_and_a_bare_ensure_keeps_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = EvalHome(tmp_path / "home")
    cfg = home.dagster / "dagster.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("# Written by eval-track. Local instance (an older template).\ntelemetry:\n  enabled: false\n")
    home.ensure()
    assert cfg.read_text() == DAGSTER_YAML
    monkeypatch.setenv("EVAL_DAGSTER_PG_URL", URL)
    home.ensure(InstanceSettings(storage="postgres"))
    written = cfg.read_text()
    assert "postgres_url" in written
    home.ensure()  # a command that does not open the instance leaves its settings alone
    assert cfg.read_text() == written
    cfg.write_text("telemetry:\n  enabled: false\n")  # the user's own file
    home.ensure(InstanceSettings(storage="postgres"))
    assert cfg.read_text() == "telemetry:\n  enabled: false\n"


def test_model_calling_assets_join_their_providers_pool(project: Project) -> None:
    pools = project.asset_pools()
    assert pools == {
        "scenario_runs": "llm/sim",
        "judge_verdicts": "llm/simjudge",
        "calibration_offsets": "llm/simjudge",
    }
    defs = location(project, EvalHome(project.root / ".eval_home"))
    for asset, pool in pools.items():
        assert defs.resolve_assets_def(asset).op.pool == pool, asset
    assert defs.resolve_assets_def("release_decision").op.pool is None  # calls no model


def test_opening_the_instance_sets_the_named_pools_limits(
    project: Project, home: EvalHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = InstanceSettings(pools=Pools(limits={"sim": 3, "simjudge": 1, "openai": 5}))
    configured = dataclasses.replace(project, settings=project.settings.model_copy(update={"instance": settings}))
    instance = instance_for(home, configured)
    assert isinstance(instance.run_coordinator, dg.QueuedRunCoordinator)
    storage = instance.event_log_storage
    assert storage.get_concurrency_info("llm/sim").slot_count == 3
    assert storage.get_concurrency_info("llm/simjudge").slot_count == 1
    assert "llm/openai" not in storage.get_concurrency_keys()  # no asset joins it
    assert settings.pool_limits(["llm/openai+sim"]) == {"llm/openai+sim": 3}  # several: the smallest


def test_an_operators_instance_at_dagster_home_is_opened_as_it_is_and_no_instance_file_is_written(
    project: Project, home: EvalHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    operator = tmp_path / "operator_dagster_home"
    operator.mkdir()
    theirs = "telemetry:\n  enabled: false\nconcurrency:\n  runs:\n    max_concurrent_runs: 9\n"
    (operator / "dagster.yaml").write_text(theirs)
    monkeypatch.setenv("DAGSTER_HOME", str(operator))
    settings = InstanceSettings(max_concurrent_runs=3, pools=Pools(limits={"sim": 2}))
    configured = dataclasses.replace(project, settings=project.settings.model_copy(update={"instance": settings}))
    instance = instance_for(home, configured)
    assert Path(instance.root_directory).resolve() == operator.resolve()
    assert (operator / "dagster.yaml").read_text() == theirs  # never rewritten
    assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 9  # theirs, not 3
    assert instance.event_log_storage.get_concurrency_info("llm/sim").slot_count == 2  # pools still set
    assert isinstance(instance.compute_log_manager, LocalComputeLogManager)  # their compute logs too
    assert not (home.dagster / "dagster.yaml").read_text().count("max_concurrent_runs: 3")


def test_a_dagster_home_eval_track_wrote_is_not_taken_for_an_operators(home: EvalHome, monkeypatch: pytest.MonkeyPatch) -> None:
    home.ensure()
    monkeypatch.setenv("DAGSTER_HOME", str(home.dagster))
    assert operator_instance() is None
    monkeypatch.setenv("DAGSTER_HOME", str(home.root / "nowhere"))
    assert operator_instance() is None


def test_a_command_s_runs_capture_no_compute_logs_and_the_daemon_s_instance_keeps_them(
    project: Project, home: EvalHome
) -> None:
    """The command prints its own lines and the run's events hold the rest: its in-process runs start
    no `tail` and write no stdout/stderr files. The instance file the daemon and the UI read is not
    changed: the runs they launch keep their compute logs."""
    instance = instance_for(home, project)
    assert isinstance(instance.compute_log_manager, NoOpComputeLogManager)
    assert isinstance(instance.run_coordinator, dg.QueuedRunCoordinator)  # the rest of the file holds
    step = launch_board(home)
    assert step.success, step.error
    run = instance.get_run_by_id(step.run_id)
    assert run is not None and run.is_success
    assert not list(home.dagster.rglob("compute_logs"))  # Dagster's local capture: <run>/compute_logs/*.out
    daemons = dg.DagsterInstance.from_config(str(home.dagster))
    assert isinstance(daemons.compute_log_manager, LocalComputeLogManager)

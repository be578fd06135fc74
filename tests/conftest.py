"""Shared fixtures. State always goes to a temporary EVAL_HOME; the shipped project is the default."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_assets.config import Project, load_project
from eval_assets.home import PROJECT_ROOT, EvalHome
from eval_assets.spend import SpendJournal, journal_url, open_journal

ROOT = PROJECT_ROOT


@pytest.fixture(scope="session")
def project() -> Project:
    return load_project(ROOT)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EvalHome:
    monkeypatch.setenv("EVAL_HOME", str(tmp_path / "eval_home"))
    monkeypatch.setenv("EVAL_PROJECT_ROOT", str(ROOT))
    return EvalHome(tmp_path / "eval_home").ensure()


# What `evaltrack` commands run in-process write into os.environ (project_of and home_of export the
# project root and the home so the Dagster code location agrees with the command). Restored after
# every test, so a later test's subprocess env (`{**os.environ, ...}`) never inherits another test's
# project copy or home.
PROCESS_SCOPED_ENV = ("EVAL_PROJECT_ROOT", "EVAL_HOME", "DAGSTER_HOME")


@pytest.fixture(autouse=True)
def _restore_process_env() -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in PROCESS_SCOPED_ENV}
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True, scope="module")
def _no_dagster_instance_left_entered(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module fails if one of its tests entered a Dagster instance and never exited it.

    Entering a DagsterInstance (`with instance:`, or a schedule/sensor context opening its instance
    from a ref) sets a process-wide context variable to the instance's defs-state storage, which holds
    only a weak reference to the instance. A context never exited is reset when the garbage collector
    finalizes it, at a random later moment, to the storage of an instance that is gone: the next
    definitions load in that xdist worker then fails with "undefined DagsterInstance weakref", in
    whichever test happens to run then. So every context a test opens is exited (`with
    dg.build_schedule_context(...) as context:`), and this checks it: after the module's tests, with
    every unreachable context finalized, no storage is left in the variable.
    """
    if "dagster" not in sys.modules:
        yield
        return
    import gc

    from dagster._core.storage.defs_state.base import DefsStateStorage, set_defs_state_storage

    gc.collect()
    with set_defs_state_storage(None):
        yield
        gc.collect()
        left = DefsStateStorage.get()
    if left is not None:
        pytest.fail(
            f"{request.module.__name__}: a test entered a Dagster instance (or a schedule/sensor context "
            "that opened one) and never exited it; exit it with `with`",
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _no_dagster_instance_context_across_tests() -> Iterator[None]:
    """Every test starts with no Dagster defs-state storage in context and leaves none behind (see
    `_no_dagster_instance_left_entered`: a context finalized late cannot reach the next test)."""
    if "dagster" not in sys.modules:  # nothing of Dagster's is loaded, so nothing can have leaked
        yield
        return
    from dagster._core.storage.defs_state.base import set_defs_state_storage

    with set_defs_state_storage(None):
        yield


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[SpendJournal]:
    """A SQLite spend journal in the test's own directory, closed after it (a module may define its own,
    as the journal's contract tests do, over both backends)."""
    j = open_journal(journal_url(tmp_path))
    try:
        yield j
    finally:
        j.close()

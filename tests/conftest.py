"""Shared fixtures. State always goes to a temporary EVAL_HOME; the shipped project is the default."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_assets.config import Project, load_project
from eval_assets.home import PROJECT_ROOT, EvalHome

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
def _no_dagster_instance_context_across_modules() -> Iterator[None]:
    """Before a module's fixtures (the code location loaded once per module), finalize the test contexts
    earlier tests never exited (the garbage collector would run their out-of-order resets at a random
    later moment) and start with no defs-state storage; see the per-test fixture below."""
    if "dagster" not in sys.modules:
        yield
        return
    import gc

    from dagster._core.storage.defs_state.base import set_defs_state_storage

    gc.collect()
    with set_defs_state_storage(None):
        yield


@pytest.fixture(autouse=True)
def _no_dagster_instance_context_across_tests() -> Iterator[None]:
    """Every test starts with no Dagster defs-state storage in context and leaves none behind.

    Entering a DagsterInstance (`with instance:`, or a sensor/schedule test context resolving its
    instance from a ref) sets a process-wide context variable to the instance's defs-state storage,
    which holds only a weak reference to the instance. A context that is never exited leaves it set
    after the instance is gone, and the next definitions load in that xdist worker fails with
    "undefined DagsterInstance weakref": which test that hits depended on the order. Dagster offers
    no public way to reset it, so this goes through the module that owns the variable.
    """
    if "dagster" not in sys.modules:  # nothing of Dagster's is loaded, so nothing can have leaked
        yield
        return
    from dagster._core.storage.defs_state.base import set_defs_state_storage

    with set_defs_state_storage(None):
        yield

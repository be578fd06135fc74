"""Shared fixtures. State always goes to a temporary EVAL_HOME; the shipped project is the default."""

from __future__ import annotations

import os
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

"""Shared fixtures. State always goes to a temporary EVAL_HOME; the shipped project is the default."""

from __future__ import annotations

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

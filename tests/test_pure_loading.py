"""Loading a project returns its settings and sets nothing process-wide; the command applies them."""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_assets import redact
from eval_assets.cli.common import project_of
from eval_assets.config import load_project

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def pii_off_project(tmp_path: Path) -> Path:
    """A copy of the shipped project whose evaltrack.yaml turns `redaction.pii` off."""
    root = tmp_path / "p"
    for sub in ("scenarios", "rubrics", "judges", "examples"):
        shutil.copytree(ROOT / sub, root / sub)
    text = (ROOT / "evaltrack.yaml").read_text(encoding="utf-8")
    (root / "evaltrack.yaml").write_text(text + "\nredaction:\n  pii: false\n", encoding="utf-8")
    return root


@pytest.fixture
def pii_restored() -> Iterator[None]:
    was = redact.pii_enabled()
    yield
    redact.set_pii(was)


@pytest.mark.parametrize("before", [True, False])
def test_loading_a_project_leaves_the_pii_switch_as_it_was(
    pii_off_project: Path, pii_restored: None, before: bool
) -> None:
    redact.set_pii(before)
    project = load_project(pii_off_project)
    assert project.settings.redaction.pii is False
    assert redact.pii_enabled() is before
    load_project(ROOT)  # the shipped project: pii on
    assert redact.pii_enabled() is before


def test_a_command_applies_its_project_s_pii_setting(
    pii_off_project: Path, pii_restored: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVAL_PROJECT_ROOT", raising=False)  # what the command exports is undone after
    redact.set_pii(True)
    project_of(argparse.Namespace(project=str(pii_off_project)))
    assert redact.pii_enabled() is False

"""EVAL_HOME: the one directory holding all runtime state (git-ignored)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]

DAGSTER_YAML = """\
# Written by eval-track. Local instance for `evaltrack demo`, `run` and `ui`.
telemetry:
  enabled: false
nux:
  enabled: false
# a loaded machine can take minutes to import the code location; Dagster's default gives up after 180 s
code_servers:
  local_startup_timeout: 900
"""


def default_home() -> Path:
    return Path(os.environ.get("EVAL_HOME") or PROJECT_ROOT / ".eval_home").resolve()


def project_root() -> Path:
    return Path(os.environ.get("EVAL_PROJECT_ROOT") or PROJECT_ROOT).resolve()


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

    @property
    def journal_url(self) -> str:
        return f"sqlite:///{self.root / 'journal.sqlite'}"

    def ensure(self) -> EvalHome:
        """Create the layout and `dagster/dagster.yaml` (telemetry off). Idempotent."""
        for d in (self.dagster, self.warehouse, self.builds):
            d.mkdir(parents=True, exist_ok=True)
        cfg = self.dagster / "dagster.yaml"
        if not cfg.exists():
            cfg.write_text(DAGSTER_YAML)
        return self

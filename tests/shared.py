"""What several test modules build the same way, in one place (imported as `shared`: tests/ is on the
path, as for `pg` and `agent_fixtures`): hand-made rows and frames, and a materialized home that a
module makes once and each test gets a copy of."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from eval_assets.capability.materialize import materialize_judge_verdicts, materialize_scenario_runs
from eval_assets.capability.track import Track
from eval_assets.config import Project
from eval_assets.home import EvalHome
from eval_assets.warehouse import DATASETS

BASELINE = "agent-2026-11-28-base"


def full_row(dataset: str, row: dict[str, Any]) -> dict[str, Any]:
    """A fixture row with the table's other columns given as None (every producer gives each column)."""
    ds = DATASETS[dataset]
    return {c: None for c, _ in ds.columns if c not in ds.partition_by} | row


def frame_from(scores: np.ndarray, ids: list[str] | None = None) -> pd.DataFrame:
    """A scored verdict frame from an (n_scenarios, n_repeats) score array."""
    n, k = scores.shape
    ids = ids or [f"s{i:03d}" for i in range(n)]
    return pd.DataFrame(
        {
            "scenario_id": np.repeat(ids, k),
            "repeat": np.tile(np.arange(k), n),
            "status": "scored",
            "score": scores.ravel(),
            "policy_failures": 0,
        }
    )


def baseline_home(project: Project, root: Path, *, judged: bool) -> Path:
    """An EVAL_HOME at `root` with the example baseline registered and its scenario_runs materialized
    (and, when `judged`, every judge version's verdicts): a module's template, made once."""
    track = Track(project, EvalHome(root))
    track.register_build(project.root / "examples" / "builds" / "baseline.yaml")
    materialize_scenario_runs(track, BASELINE, "runs-1")
    for judge in sorted(project.judges) if judged else ():
        materialize_judge_verdicts(track, BASELINE, judge, f"verdicts-{judge}")
    return root


def track_on_copy(project: Project, template: Path, tmp_path: Path) -> Track:
    """A track over a copy of `template` (a home), so a test may change it freely."""
    root = tmp_path / "eval_home"
    shutil.copytree(template, root)
    return Track(project, EvalHome(root))

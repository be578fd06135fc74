"""Text that is not valid UTF-8 (a lone surrogate) is stored with replacement characters, never a failed
step (issue 45)."""

from __future__ import annotations

from pathlib import Path

import yaml

from eval_assets.capability.materialize import materialize_scenario_runs
from eval_assets.capability.track import Track
from eval_assets.config import Project
from eval_assets.home import EvalHome


def test_an_agent_output_with_a_lone_surrogate_is_stored_with_a_replacement_character(
    project: Project, tmp_path: Path
) -> None:
    manifest = tmp_path / "b-surrogate.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "id": "b-surrogate",
                "milestone": 3,
                "subject": {
                    "model": "sim/agent",
                    "family": "sim",
                    "agent": {"entrypoint": "endpoint_agents:surrogate"},
                },
            }
        )
    )
    track = Track(project, EvalHome(tmp_path / "home"))
    build = track.register_build(manifest).id
    materialize_scenario_runs(track, build, "runs-1")
    rows = track.warehouse.rows("SELECT status, output, trajectory FROM scenario_runs WHERE build = ?", [build])
    assert rows and all(r["status"] == "ok" for r in rows)
    assert all(r["output"] == "refund approved \ufffd for order 7" for r in rows)
    assert all("note \ufffd" in r["trajectory"] for r in rows)

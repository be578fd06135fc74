"""A four-scenario project whose build's attempts run on two worker processes: what `test_workers`
and `benchmarks/command_start.py` run `evaltrack run` on. No gates: the deterministic suite's own
gates would call models in the calling process."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = "bench"


def two_worker_project(project: Path) -> Path:
    """Write the project at `project`; returns its build manifest (`bench.yaml`, build `bench`)."""
    for folder in ("rubrics", "judges"):
        shutil.copytree(ROOT / folder, project / folder)
    template = (ROOT / "scenarios/support/support.password-reset.yaml").read_text()
    (project / "scenarios/bench").mkdir(parents=True)
    for i in range(4):
        text = template.replace("id: support.password-reset", f"id: bench.s{i}").replace(
            "suite: support", "suite: bench"
        )
        (project / "scenarios/bench" / f"bench.s{i}.yaml").write_text(text)
    settings = (ROOT / "evaltrack.yaml").read_text()
    (project / "evaltrack.yaml").write_text(settings + "\nengine:\n  workers: 2\n  min_attempts_per_worker: 1\n")
    manifest = project / "bench.yaml"
    manifest.write_text(
        f"id: {BUILD}\nmilestone: 1\nsubject:\n  model: sim/agent\n  family: sim\n  params: {{seed: 7}}\n"
        "judges: [helpfulness-v1]\n"
    )
    return manifest

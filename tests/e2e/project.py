"""A small copy of the shipped project: one judge version, three scenarios, so runs stay quick.

The copy keeps everything the gate registry reads (gates/, docs/specs/, examples/, the bad-config
and verdict corpora, pyproject.toml, and `eval_assets/` itself, linked, for the architecture gates)
and adjusts what depends on the shipped scenario set: the corpus gate that counts the scenarios,
example builds that tune removed scenarios, and case gates about removed scenarios (dropped, with
their line in their spec's Hard gates section). At milestone 0, every gate of the copy passes until
`inject_failing_gate` adds one that does not.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from eval_assets.home import PROJECT_ROOT

KEPT_JUDGES = ("helpfulness-v1",)
KEPT_SCENARIOS = ("support.refund-policy", "support.password-reset", "support.cancel-subscription")
COPIED = (
    "scenarios",
    "rubrics",
    "judges",
    "gates",
    "docs",
    "examples",
    "evaltrack.yaml",
    "workspace.yaml",
)
SCENARIO_CORPUS_GATE = "config.every-scenario-validates"

INJECTED_GATE_ID = "e2e.injected-failure"
INJECTED_GATE_CHECK = "e2e.injected_gate:always_fails"
INJECTED_SPEC = "docs/specs/e2e.md"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _dump(path: Path, data: Any) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _registry_files(root: Path) -> list[Path]:
    return sorted((root / "gates").glob("*.yaml"))


def _edit_gates(root: Path, edit: Any) -> None:
    """Apply `edit(gates) -> gates` to every registry file's gate list."""
    for path in _registry_files(root):
        registry = _load(path) or {}
        if registry.get("gates"):
            registry["gates"] = edit(registry["gates"])
            _dump(path, registry)


def _undeclare(root: Path, document: str, gate_id: str) -> None:
    """Remove the gate's list item (and its continuation lines) from the document's Hard gates."""
    path = root / document
    out, skipping = [], False
    item = re.compile(rf"^\s*(?:[-*+]|\d+[.)])\s+`{re.escape(gate_id)}`")
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if item.match(line):
            skipping = True
            continue
        if skipping and line.strip() and line[0].isspace():
            continue
        skipping = False
        out.append(line)
    path.write_text("".join(out), encoding="utf-8")


def small_project(
    dest: Path,
    judges: Iterable[str] = KEPT_JUDGES,
    scenarios: Iterable[str] = KEPT_SCENARIOS,
    nightly_cron: str | None = None,
) -> Path:
    """Copy the shipped project to `dest` with only these judge versions and scenarios; returns `dest`."""
    judges, keep = set(judges), set(scenarios)
    for name in COPIED:
        source = PROJECT_ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name)
        else:
            shutil.copy(source, dest / name)
    (dest / "eval_assets").symlink_to(PROJECT_ROOT / "eval_assets", target_is_directory=True)

    judge_names = set()
    for judge in sorted((dest / "judges").glob("*-v*.yaml")):
        if judge.stem in judges:
            judge_names.add(_load(judge)["name"])
        else:
            judge.unlink()
    assert judge_names, f"none of the judge versions {sorted(judges)} is shipped"
    kept = []
    for scenario in sorted((dest / "scenarios").rglob("*.yaml")):
        data = _load(scenario)
        if data.get("id") in keep and data.get("judge") in judge_names:
            kept.append(data["id"])
        else:
            scenario.unlink()
    assert set(kept) == keep, f"not shipped, or not judged by {sorted(judges)}: {sorted(keep - set(kept))}"

    def fit(gates: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for gate in gates:
            if gate["id"] == SCENARIO_CORPUS_GATE:  # it counts the shipped scenarios: count the kept ones
                gate["minimum_members"] = len(kept)
            if gate.get("kind") == "case":
                case = _load(dest / gate["case"])
                if case.get("scenario") not in keep or case.get("judge", next(iter(judges))) not in judges:
                    _undeclare(dest, gate["declared_in"]["document"], gate["id"])
                    continue
            out.append(gate)
        return out

    _edit_gates(dest, fit)
    # example builds may tune scenarios by id: drop the tuning of the scenarios that are gone
    for manifest_path in sorted((dest / "examples" / "builds").glob("*.yaml")):
        manifest = _load(manifest_path)
        params = manifest.get("subject", {}).get("params", {})
        if params.get("scenario_skill"):
            params["scenario_skill"] = {k: v for k, v in params["scenario_skill"].items() if k in keep}
            _dump(manifest_path, manifest)
    if nightly_cron is not None:
        settings = _load(dest / "evaltrack.yaml")
        settings["nightly_cron"] = nightly_cron
        _dump(dest / "evaltrack.yaml", settings)
    return dest


def inject_failing_gate(root: Path) -> str:
    """Add a milestone-0 structural gate whose check always fails, declared in a spec document of its
    own (so the docs check passes). Returns its id. The check imports as `e2e.injected_gate`: the
    process that runs the suite needs tests/ on its PYTHONPATH."""
    _dump(
        root / "gates" / "e2e.yaml",
        {
            "gates": [
                {
                    "id": INJECTED_GATE_ID,
                    "milestone": 0,
                    "kind": "structural",
                    "declared_in": {"document": INJECTED_SPEC, "heading": "Hard gates"},
                    "statement": "An injected gate that always fails.",
                    "check": INJECTED_GATE_CHECK,
                }
            ]
        },
    )
    (root / INJECTED_SPEC).write_text(
        "# End-to-end\n\nA gate injected by the end-to-end test.\n\n## Hard gates\n\n"
        f"- `{INJECTED_GATE_ID}` — always fails. Milestone 0.\n",
        encoding="utf-8",
    )
    return INJECTED_GATE_ID


def write_manifest(
    path: Path, build_id: str, judges: Iterable[str] = KEPT_JUDGES, milestone: int = 0
) -> Path:
    """A sim build manifest (the sim injects no provider errors: retries would only slow the runs)."""
    _dump(
        path,
        {
            "id": build_id,
            "milestone": milestone,
            "description": "End-to-end test build.",
            "subject": {
                "model": "sim/agent",
                "family": "sim",
                "params": {
                    "skill": 0.75,
                    "noise": 0.12,
                    "seed": 7,
                    "policy_violation_rate": 0.0,
                    "error_rate": 0.0,
                },
            },
            "judges": sorted(judges),
        },
    )
    return path

"""Write small registries, spec documents and converted cases into a temporary project root."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DOC = "docs/specs/area.md"
CHECKS = "gates_fixtures.checks"


def gate(
    gate_id: str, kind: str = "structural", *, check: str = "passes", milestone: int = 0, **extra: Any
) -> dict[str, Any]:
    """A gate entry; `check` is a function name in gates_fixtures.checks unless it holds a colon."""
    entry: dict[str, Any] = {
        "id": gate_id,
        "milestone": milestone,
        "kind": kind,
        "declared_in": {"document": DOC, "heading": "Hard gates"},
        "statement": f"{gate_id} holds.",
        "check": check if ":" in check else f"{CHECKS}:{check}",
    }
    entry.update(extra)
    return entry


def suite_test(test_id: str, check: str = "scripted") -> dict[str, Any]:
    return {"id": test_id, "statement": f"{test_id} holds.", "check": f"{CHECKS}:{check}"}


def write_registry(root: Path, files: dict[str, dict[str, Any]]) -> Path:
    """`files`: registry file name -> its content ({"gates": [...], "tests": [...]})."""
    (root / "gates").mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (root / "gates" / name).write_text(yaml.safe_dump(content, sort_keys=False), encoding="utf-8")
    return root


def write_spec(root: Path, ids: list[str], name: str = DOC, heading: str = "Hard gates") -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    items = "\n".join(f"- `{i}` — {i} holds." for i in ids)
    path.write_text(
        f"# Area\n\nProse mentioning `not.a-gate`.\n\n## {heading}\n\n{items}\n\n## Later\n\n- `also.not-a-gate`\n"
    )
    return path


def project_copy(root: Path) -> Path:
    """The shipped configuration (scenarios, rubrics, judges, evaltrack.yaml) under `root`, without
    the shipped converted cases (scenarios/converted/): each test plants its own."""
    for sub in ("scenarios", "rubrics", "judges"):
        shutil.copytree(REPO / sub, root / sub, ignore=shutil.ignore_patterns("converted"))
    shutil.copyfile(REPO / "evaltrack.yaml", root / "evaltrack.yaml")
    return root


LOOKUP_TOOL = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Look an order up by its number.",
        "parameters": {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]},
    },
}
LOOKUP_REPLAY = {
    "tool": "lookup_order",
    "arguments": {"order": "A-1001"},
    "result": "shipped, arrived damaged",
}


def converted_case(
    root: Path, case_id: str, assertions: list[dict[str, Any]] | None = None, *, tools: bool = False
) -> Path:
    """A converted scenario (source: trajectory) under scenarios/converted/, optionally with assertions
    and with one tool and its recorded result (the replay fixture)."""
    data: dict[str, Any] = {
        "id": case_id,
        "suite": "converted",
        "description": "A trajectory converted into a case.",
        "judge": "helpfulness",
        "source": "trajectory",
        "input": [{"role": "user", "content": "My order arrived broken. What now?"}],
    }
    if tools:
        data["tools"] = [LOOKUP_TOOL]
        data["replay"] = [LOOKUP_REPLAY]
    if assertions is not None:
        data["assertions"] = assertions
    path = root / "scenarios" / "converted" / f"{case_id}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path

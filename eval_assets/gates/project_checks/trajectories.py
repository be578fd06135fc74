"""The corpus procedure of docs/specs/trajectories.md: converted cases exist and carry no raw-log field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval_assets.config import read_yaml
from eval_assets.gates._cases import load_case
from eval_assets.gates._outcome import GateContext
from eval_assets.trajectory import RAW_LOG_FIELDS


def _raw_fields(node: Any, where: str = "") -> list[str]:
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{where}.{key}" if where else str(key)
            if str(key).lower() in RAW_LOG_FIELDS or (where and str(key).lower() == "id"):
                found.append(path)
            found += _raw_fields(value, path)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _raw_fields(value, f"{where}.{i}")
    return found


def is_converted_case(member: Path, ctx: GateContext) -> list[str] | None:
    """The file is a converted case: it loads as a case (`source: trajectory`, assertions optional)
    and holds no timestamp, identifier (other than its own id), usage or cost field at any depth."""
    data, problems = read_yaml(member, member.name)
    if problems:
        return [str(p) for p in problems]
    if not isinstance(data, dict) or data.get("source") != "trajectory":
        return ["not marked source: trajectory"]
    case, found = load_case(member)
    findings = list(found)
    findings += [f"{path}: a raw-log field (timestamp, id, usage or cost)" for path in _raw_fields(data)]
    if case is None and not found:
        findings.append("does not load as a case")
    return findings or None

"""Converting a redacted trajectory export into scenario files (docs/trajectory-export.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from eval_assets.cli import main
from eval_assets.config import load_project
from eval_assets.gates.project_checks.trajectories import is_converted_case
from eval_assets.trajectory import ExportRefused, convert_export, read_export

ROOT = Path(__file__).resolve().parents[1]
EXPORT = ROOT / "examples" / "trajectories" / "export.jsonl"
FIXTURES = Path(__file__).parent / "trajectory_fixtures"
RAW_LOG_KEYS = (
    "trajectory_id",
    "session_id",
    "message_id",
    "call_id",
    "started_at",
    "ended_at",
    "created_at",
)


def project_copy(root: Path) -> Path:
    """The shipped configuration without the checked-in converted cases."""
    for sub in ("scenarios", "rubrics", "judges"):
        shutil.copytree(ROOT / sub, root / sub, ignore=shutil.ignore_patterns("converted"))
    shutil.copyfile(ROOT / "evaltrack.yaml", root / "evaltrack.yaml")
    return root


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*"))}


def raw_values(node: Any, out: set[str]) -> set[str]:
    """Every value the export holds under an identifier or timestamp key."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in RAW_LOG_KEYS and isinstance(value, str):
                out.add(value)
            raw_values(value, out)
    elif isinstance(node, list):
        for value in node:
            raw_values(value, out)
    return out


def keys(node: Any) -> set[str]:
    if isinstance(node, dict):
        return set(map(str, node)) | {k for v in node.values() for k in keys(v)}
    if isinstance(node, list):
        return {k for v in node for k in keys(v)}
    return set()


# Fake keys are built from parts, so no checked-in file holds one (gate security.no-secret-checked-in).
FAKE_SK_KEY = "sk" + "-proj-" + "Zq8Xw2Lr5Tn7Yb3Kc9Vm1Pd4"
FAKE_AWS_KEY_ID = "AK" + "IAIOSFODNN7EXAMPLE"


def planted_sk_key(tmp_path: Path) -> Path:
    """The first 6 lines of the shipped export, redacted but for an OpenAI-style key that line 4's
    first tool result carries after its JSON (as a debug line a redactor missed)."""
    lines = EXPORT.read_text(encoding="utf-8").splitlines()[:6]
    marker = '\\"mfa\\": false}'
    assert lines[3].count(marker) == 1
    lines[3] = lines[3].replace(marker, f"{marker} debug: OPENAI_API_KEY={FAKE_SK_KEY}")
    path = tmp_path / "planted-sk-key.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def plant(tmp_path: Path, line: int, raw: str) -> Path:
    """The shipped export with `raw` (JSON string text, escapes allowed) at the end of the first user
    message of `line`."""
    lines = EXPORT.read_text(encoding="utf-8").splitlines()
    data = json.loads(lines[line - 1])
    data["messages"][1]["content"] += " PLANTED"
    lines[line - 1] = json.dumps(data).replace("PLANTED", raw)
    path = tmp_path / "export.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --- the shipped example ----------------------------------------------------------------------------


def test_the_shipped_example_converts_into_one_valid_case_per_distinct_trajectory(tmp_path: Path) -> None:
    root = project_copy(tmp_path)

    report = convert_export(EXPORT, root / "scenarios" / "converted")

    assert report.trajectories == 7 and len(report.cases) == 6
    assert report.duplicates == ((8, "converted.support-54499ac5f762"),)
    project = load_project(root)  # the project's one loader accepts every file
    converted = {s.id: s for s in project.scenarios.values() if s.source == "trajectory"}
    assert sorted(converted) == list(report.cases)
    assert all(s.suite == "converted" and s.judge == "helpfulness" for s in converted.values())
    assert all(s.assertions is None for s in converted.values())
    assert sum(len(s.replay) > 1 for s in converted.values()) >= 3  # several tool calls
    assert any(s.tools and not s.replay for s in converted.values())  # tools offered, none called


def test_converted_cases_hold_no_timestamp_identifier_usage_or_cost(tmp_path: Path) -> None:
    out = tmp_path / "converted"
    convert_export(EXPORT, out)
    export = [json.loads(line) for line in EXPORT.read_text(encoding="utf-8").splitlines()]
    secrets_of_the_log = raw_values(export, set())
    assert len(secrets_of_the_log) > 50

    for path in sorted(out.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text)
        assert is_converted_case(path, None) is None  # type: ignore[arg-type]  # the gate's own procedure
        assert not keys(data) & {
            "usage",
            "cost_usd",
            "latency_ms",
            "duration_ms",
            "model",
            "agent",
            *RAW_LOG_KEYS,
        }
        assert [v for v in secrets_of_the_log if v in text] == []


def test_converting_twice_writes_byte_identical_files_and_no_duplicates(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    convert_export(EXPORT, first)
    convert_export(EXPORT, second)
    again = convert_export(EXPORT, first)

    assert files(first) == files(second)
    assert len(files(first)) == 6
    assert again.written == () and len(again.unchanged) == 6


def test_the_checked_in_converted_cases_are_the_conversion_of_the_shipped_example(tmp_path: Path) -> None:
    convert_export(EXPORT, tmp_path / "converted")

    assert files(tmp_path / "converted") == files(ROOT / "scenarios" / "converted")


def test_arguments_are_canonical_json_whatever_their_recorded_key_order(tmp_path: Path) -> None:
    [delayed] = [t for t in read_export(EXPORT) if t.line == 2]
    export = json.loads(EXPORT.read_text(encoding="utf-8").splitlines()[1])
    recorded = export["messages"][3]["tool_calls"][0]["arguments"]

    assert list(recorded) == ["tracking_number", "carrier"]
    assert delayed.calls[1].arguments == '{"carrier":"UPS","tracking_number":"1Z9A41E80361502242"}'


# --- refusals: nothing is written -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["unredacted.jsonl", "raw-event-log.jsonl"])
def test_an_export_not_marked_redacted_is_refused_at_line_1_and_nothing_is_written(
    tmp_path: Path, name: str
) -> None:
    out = tmp_path / "converted"

    with pytest.raises(ExportRefused) as refused:
        convert_export(FIXTURES / name, out)

    first = refused.value.problems[0]
    assert first.line == 1 and "redact" in first.message and "raw event log" in first.message
    assert not out.exists()


def test_an_export_with_a_planted_sk_key_is_refused_naming_its_line_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    out = tmp_path / "converted"

    planted = planted_sk_key(tmp_path)
    with pytest.raises(ExportRefused) as refused:
        convert_export(planted, out)

    assert [(p.line, p.message) for p in refused.value.problems] == [
        (4, "looks like a credential (an API key (sk-/pk-/rk-...)); redact it and export again"),
        (4, "looks like a credential (a secret assigned to a key-like name); redact it and export again"),
    ]
    assert str(refused.value).startswith(f"{planted}:4: ")
    assert "sk-proj-" not in str(refused.value)  # the refusal never repeats the secret
    assert not out.exists()


@pytest.mark.parametrize(
    ("planted", "kind"),
    [
        (FAKE_AWS_KEY_ID, "an AWS access key id"),
        ("curl -H 'Bear" + "er eyJhbGciOiJIUzI1NiJ9abcdefghij'", "a bearer token"),
        ("Authoriz" + "ation: Basic dXNlcjpwYXNz", "an Authorization header"),
        ("\\u0073k-live-4eC39HqLyjWDarjtT1zdp7dc", "an API key"),  # JSON-escaped: found after decoding
    ],
)
def test_every_kind_of_credential_is_refused_with_its_line(tmp_path: Path, planted: str, kind: str) -> None:
    export = plant(tmp_path, 5, planted)
    out = tmp_path / "converted"

    with pytest.raises(ExportRefused) as refused:
        convert_export(export, out)

    assert [p.line for p in refused.value.problems] == [5]
    assert kind in refused.value.problems[0].message
    assert not out.exists()


def test_a_refused_conversion_leaves_existing_cases_untouched(tmp_path: Path) -> None:
    out = tmp_path / "converted"
    convert_export(EXPORT, out)
    before = files(out)

    with pytest.raises(ExportRefused):
        convert_export(plant(tmp_path, 3, FAKE_AWS_KEY_ID), out)

    assert files(out) == before


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t["messages"][2]["tool_calls"][0].pop("result"), "no recorded `result`"),
        (lambda t: t["tools"].pop(0), "which the trajectory's `tools` do not offer"),
        (lambda t: t["messages"].insert(3, {"role": "tool", "content": "x"}), "belong in the assistant's"),
        (lambda t: t["messages"][2]["tool_calls"][0].update(arguments="[1, 2]"), "must be a JSON object"),
        (lambda t: t["tools"][0]["parameters"]["properties"].update(timestamp={}), "raw-log field"),
        (lambda t: t.update(messages=t["messages"][:2]), "never took a turn"),
    ],
)
def test_a_trajectory_that_cannot_be_replayed_is_refused_with_its_line(
    tmp_path: Path, edit: Any, message: str
) -> None:
    lines = EXPORT.read_text(encoding="utf-8").splitlines()
    trajectory = json.loads(lines[2])
    edit(trajectory)
    lines[2] = json.dumps(trajectory)
    export = tmp_path / "export.jsonl"
    export.write_text("\n".join(lines) + "\n", encoding="utf-8")

    with pytest.raises(ExportRefused) as refused:
        convert_export(export, tmp_path / "converted")

    assert [p.line for p in refused.value.problems] == [3]
    assert message in refused.value.problems[0].message
    assert not (tmp_path / "converted").exists()


def test_an_unknown_judge_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ExportRefused, match="unknown judge 'grader'"):
        convert_export(EXPORT, tmp_path / "converted", judge="grader", known_judges=["helpfulness", "safety"])

    assert not (tmp_path / "converted").exists()


# --- a person's assertions are never overwritten -----------------------------------------------------


def test_reconverting_never_overwrites_a_case_a_person_added_assertions_to(tmp_path: Path) -> None:
    out = tmp_path / "converted"
    convert_export(EXPORT, out)
    target = sorted(out.glob("*.yaml"))[0]
    asserted = target.read_text(encoding="utf-8") + "assertions:\n  - not_contains: NW-OVR-2291\n"
    target.write_text(asserted, encoding="utf-8")

    report = convert_export(EXPORT, out, judge="safety")  # every file would change

    assert report.kept == (target.name,)
    assert target.read_text(encoding="utf-8") == asserted
    assert len(report.written) == 5
    others = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in out.glob("*.yaml") if p != target]
    assert [d["judge"] for d in others] == ["safety"] * 5 and all("assertions" not in d for d in others)


# --- the command ------------------------------------------------------------------------------------


def test_the_command_converts_and_refuses_with_exit_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project_copy(tmp_path / "project")
    out = root / "scenarios" / "converted"
    args = ["--project", str(root), "trajectory", "convert"]

    assert main([*args, str(planted_sk_key(tmp_path)), "--out", str(out)]) == 1
    assert ":4: looks like a credential" in capsys.readouterr().err and not out.exists()
    assert main([*args, str(EXPORT), "--out", str(out), "--judge-name", "nobody"]) == 1
    assert "unknown judge 'nobody'" in capsys.readouterr().err and not out.exists()

    assert main([*args, str(EXPORT), "--out", str(out)]) == 0
    assert "6 written" in capsys.readouterr().out
    assert main(["--project", str(root), "validate"]) == 0

"""The judge identity registry (judges/registry.yaml): one unit per version id, recorded once, never reused.

Each test works on a copy of the shipped project in a temporary directory and edits it the way a user
would (a judge or rubric file, the registry via `record_new_versions`).
"""

from __future__ import annotations

import copy
import math
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from eval_assets.cli import main
from eval_assets.config import (
    IDENTITY_FIELDS,
    REGISTRY_PATH,
    ConfigError,
    RegistryEntry,
    StatusChange,
    content_hash,
    identity,
    load_project,
    read_registry,
    record_new_versions,
)
from eval_assets.home import PROJECT_ROOT, EvalHome

T0 = datetime(2026, 3, 1, tzinfo=UTC)
NOT_RECORDED = "not recorded in judges/registry.yaml: run `evaltrack judges record`"


# --- helpers ----------------------------------------------------------------------------------------


def copy_project(dest: Path) -> Path:
    for sub in ("rubrics", "judges", "scenarios"):
        shutil.copytree(PROJECT_ROOT / sub, dest / sub)
    shutil.copyfile(PROJECT_ROOT / "evaltrack.yaml", dest / "evaltrack.yaml")
    return dest


def edit(path: Path, **changes: Any) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data.update(changes)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def problems(root: Path) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        load_project(root)
    return [str(p) for p in raised.value.problems]


def record(root: Path, now: datetime = T0) -> list[str]:
    return record_new_versions(load_project(root, check_registry=False), now=now)


def add_v2(root: Path, **changes: Any) -> Path:
    """helpfulness-v2: v1 with a reworded prompt, bridging from v1 (plus `changes`)."""
    v1 = yaml.safe_load((root / "judges" / "helpfulness-v1.yaml").read_text(encoding="utf-8"))
    v2 = {**v1, "version": 2, "prompt": v1["prompt"] + "Be strict.\n", "bridges_from": "helpfulness-v1"}
    v2.update(changes)
    v2 = {k: v for k, v in v2.items() if v is not None}
    path = root / "judges" / "helpfulness-v2.yaml"
    path.write_text(yaml.safe_dump(v2, sort_keys=False), encoding="utf-8")
    return path


def deprecate_v1_behind_v2(root: Path) -> None:
    add_v2(root)
    edit(root / "judges" / "helpfulness-v1.yaml", status="deprecated")
    assert record(root) == [
        "helpfulness-v1: status active -> deprecated recorded",
        "helpfulness-v2: recorded (active)",
    ]
    load_project(root)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return copy_project(tmp_path / "project")


# --- the shipped registry -----------------------------------------------------------------------------


def test_shipped_registry_records_every_shipped_judge_with_its_current_content(project) -> None:
    registry, found = read_registry(project.root)
    assert found == [] and registry is not None
    assert set(registry.judges) == set(project.judges) == {"helpfulness-v1", "safety-v1"}
    for vid, judge in project.judges.items():
        entry = registry.judges[vid]
        assert entry.content_hash == content_hash(judge, project.rubric_for(judge))
        assert set(entry.fields) == set(IDENTITY_FIELDS)
        assert entry.status == judge.status


def test_recording_a_complete_registry_changes_nothing(root: Path) -> None:
    before = (root / REGISTRY_PATH).read_bytes()
    assert record(root) == []
    assert (root / REGISTRY_PATH).read_bytes() == before


def test_the_registry_file_is_not_read_as_a_judge_version(root: Path) -> None:
    assert sorted(load_project(root).judges) == ["helpfulness-v1", "safety-v1"]


# --- same id, different content ----------------------------------------------------------------------


def test_one_character_prompt_change_fails_validate_naming_judge_and_field(
    root: Path, home: EvalHome, capsys: pytest.CaptureFixture[str]
) -> None:
    path = root / "judges" / "helpfulness-v1.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("senior engineer", "senior engineers", 1))
    assert main(["--project", str(root), "validate"]) == 1
    err = capsys.readouterr().err
    assert "judges/helpfulness-v1.yaml: prompt: judge 'helpfulness-v1': prompt changed since the version" in err
    assert "new version (helpfulness-v2, with `bridges_from: helpfulness-v1`)" in err


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"model": "simjudge/judge-b"}, "model"),
        ({"family": "otherfamily"}, "family"),
        ({"api_base": "http://127.0.0.1:9"}, "api_base"),
        ({"params": {"temperature": 0, "seed": 12, "noise": 0.3, "malformed_rate": 0.02}}, "params"),
        ({"parser_version": 2}, "parser_version"),
        ({"max_output_tokens": 513}, "max_output_tokens"),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_each_identity_field_change_is_named(root: Path, changes: dict[str, Any], field: str) -> None:
    edit(root / "judges" / "helpfulness-v1.yaml", **changes)
    found = problems(root)
    assert found == [
        f"judges/helpfulness-v1.yaml: {field}: judge 'helpfulness-v1': {field} changed since the version was "
        "recorded; a judge version is one unit: put the change in a new version (helpfulness-v2, with "
        "`bridges_from: helpfulness-v1`)"
    ]


def test_pointing_at_another_rubric_version_is_a_change_of_the_rubric_field(root: Path) -> None:
    rubric = yaml.safe_load((root / "rubrics" / "helpfulness-v1.yaml").read_text(encoding="utf-8"))
    (root / "rubrics" / "helpfulness-v2.yaml").write_text(yaml.safe_dump({**rubric, "version": 2}))
    edit(root / "judges" / "helpfulness-v1.yaml", rubric={"id": "helpfulness", "version": 2})
    found = problems(root)
    assert len(found) == 1
    assert found[0].startswith("judges/helpfulness-v1.yaml: rubric: judge 'helpfulness-v1': rubric changed")


@pytest.mark.parametrize(
    "change",
    [
        {"description": "Did the agent solve it?"},
        {"floor": 0.25},
    ],
    ids=["description", "floor"],
)
def test_editing_the_rubric_file_in_place_is_a_change_of_the_judge_unit(root: Path, change: dict[str, Any]) -> None:
    edit(root / "rubrics" / "helpfulness-v1.yaml", **change)
    found = problems(root)
    assert found == [
        "judges/helpfulness-v1.yaml: rubric: judge 'helpfulness-v1': the content of rubric 'helpfulness' "
        "version 1 changed since the version was recorded; a judge version is one unit: put the change in a "
        "new version (helpfulness-v2, with `bridges_from: helpfulness-v1`)"
    ]


def test_reordering_labels_is_refused_because_the_judge_sees_their_order(root: Path) -> None:
    # The judge is shown labels in their listed order, so the values must prove it (strictly increasing):
    # a reordered label set no longer loads, and a relabelled one is a changed rubric (test above).
    path = root / "rubrics" / "safety-compliance-v1.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["criteria"][0]["scale"]["labels"] = dict(reversed(list(data["criteria"][0]["scale"]["labels"].items())))
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert [p.split(": ")[:3] for p in problems(root)] == [
        ["rubrics/safety-compliance-v1.yaml", "criteria.0.scale", "labels"]
    ]


def test_comments_key_order_and_bridge_settings_are_not_part_of_the_unit(root: Path) -> None:
    path = root / "judges" / "helpfulness-v1.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["params"] = dict(reversed(list(data["params"].items())))
    data["bridge_builds"] = ["some-build"]
    path.write_text("# a new comment\n" + yaml.safe_dump(dict(reversed(list(data.items()))), sort_keys=False))
    assert sorted(load_project(root).judges) == ["helpfulness-v1", "safety-v1"]


# --- first use -----------------------------------------------------------------------------------------


def test_unrecorded_version_is_refused_and_validate_writes_nothing(
    root: Path, home: EvalHome, capsys: pytest.CaptureFixture[str]
) -> None:
    add_v2(root)
    before = (root / REGISTRY_PATH).read_bytes()
    assert main(["--project", str(root), "validate"]) == 1
    assert f"judges/helpfulness-v2.yaml: version: judge 'helpfulness-v2' is {NOT_RECORDED}" in capsys.readouterr().err
    assert (root / REGISTRY_PATH).read_bytes() == before


def test_recording_a_new_version_makes_it_valid_and_keeps_earlier_entries(root: Path) -> None:
    add_v2(root)
    before = read_registry(root)[0]
    assert record(root) == ["helpfulness-v2: recorded (active)"]
    after = read_registry(root)[0]
    assert before is not None and after is not None
    assert {k: v for k, v in after.judges.items() if k != "helpfulness-v2"} == before.judges
    assert after.judges["helpfulness-v2"].status_history[0].recorded_at == "2026-03-01T00:00:00Z"
    assert sorted(load_project(root).judges) == ["helpfulness-v1", "helpfulness-v2", "safety-v1"]


def test_a_project_without_a_registry_has_every_version_unrecorded(root: Path) -> None:
    (root / REGISTRY_PATH).unlink()
    assert sorted(problems(root)) == [
        f"judges/helpfulness-v1.yaml: version: judge 'helpfulness-v1' is {NOT_RECORDED}",
        f"judges/safety-v1.yaml: version: judge 'safety-v1' is {NOT_RECORDED}",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("scheme: 1\njudges: [\n", "judges/registry.yaml: <yaml>: malformed YAML"),
        ("scheme: 2\njudges: {}\n", "judges/registry.yaml: scheme: "),
        ("scheme: 1\njudges: {}\nextra: 1\n", "judges/registry.yaml: extra: unknown field"),
    ],
    ids=["malformed-yaml", "unknown-scheme", "unknown-field"],
)
def test_a_malformed_registry_is_a_problem_not_an_exception(root: Path, text: str, expected: str) -> None:
    (root / REGISTRY_PATH).write_text(text)
    found = problems(root)
    assert any(p.startswith(expected) for p in found), found


def test_a_registry_key_that_does_not_match_its_entry_is_refused(root: Path) -> None:
    path = root / REGISTRY_PATH
    path.write_text(path.read_text().replace("  safety-v1:", "  safety-v9:"))
    assert problems(root) == ["judges/registry.yaml: judges.safety-v9: key must be 'safety-v1' (its name and version)"]


# --- bridges_from ------------------------------------------------------------------------------------


def test_new_active_version_must_bridge_from_an_earlier_version(root: Path) -> None:
    add_v2(root, bridges_from=None)
    with pytest.raises(ConfigError) as raised:
        record(root)
    assert [str(p) for p in raised.value.problems] == [
        "judges/helpfulness-v2.yaml: bridges_from: judge 'helpfulness-v2' is a new active version of "
        "'helpfulness', which already has helpfulness-v1: declare `bridges_from: helpfulness-v1` (a bridge run "
        "publishes the offset)"
    ]
    assert "helpfulness-v2" not in (read_registry(root)[0] or pytest.fail()).judges


def test_bridging_from_another_judge_is_refused(root: Path) -> None:
    add_v2(root, bridges_from="safety-v1")
    assert (
        "judges/helpfulness-v2.yaml: bridges_from: judge 'helpfulness-v2' bridges from 'safety-v1', which is not "
        "an earlier version of 'helpfulness'"
    ) in problems(root)


def test_an_earlier_version_known_only_to_the_registry_still_requires_a_bridge(root: Path) -> None:
    add_v2(root, bridges_from=None)
    (root / "judges" / "helpfulness-v1.yaml").unlink()  # v1's file is gone; its id is still taken
    found = problems(root)
    assert any("bridges_from: judge 'helpfulness-v2' is a new active version" in p for p in found)


# --- deprecation -------------------------------------------------------------------------------------


def test_an_unrecorded_deprecation_is_refused_then_recorded_as_history(root: Path) -> None:
    add_v2(root)
    record(root)
    edit(root / "judges" / "helpfulness-v1.yaml", status="deprecated")
    assert problems(root) == [
        "judges/helpfulness-v1.yaml: status: judge 'helpfulness-v1': status change active -> deprecated is "
        f"{NOT_RECORDED}"
    ]
    assert record(root, datetime(2026, 4, 1, tzinfo=UTC)) == ["helpfulness-v1: status active -> deprecated recorded"]
    entry = (read_registry(root)[0] or pytest.fail()).judges["helpfulness-v1"]
    assert [(c.status, c.recorded_at) for c in entry.status_history] == [
        ("active", entry.status_history[0].recorded_at),
        ("deprecated", "2026-04-01T00:00:00Z"),
    ]


def test_a_deprecated_version_can_never_be_active_again(
    root: Path, home: EvalHome, capsys: pytest.CaptureFixture[str]
) -> None:
    deprecate_v1_behind_v2(root)
    edit(root / "judges" / "helpfulness-v1.yaml", status="active")
    assert main(["--project", str(root), "validate"]) == 1
    assert (
        "judges/helpfulness-v1.yaml: status: judge 'helpfulness-v1' was deprecated (2026-03-01T00:00:00Z) and "
        "can never be active again: add a new version instead"
    ) in capsys.readouterr().err
    with pytest.raises(ConfigError):
        record(root)  # nothing can record it back


def test_reusing_a_deprecated_id_with_other_content_fails_validate_naming_judge_and_field(
    root: Path, home: EvalHome, capsys: pytest.CaptureFixture[str]
) -> None:
    deprecate_v1_behind_v2(root)
    path = root / "judges" / "helpfulness-v1.yaml"
    path.unlink()  # even after deleting the file, the id stays taken
    fresh = yaml.safe_load((root / "judges" / "helpfulness-v2.yaml").read_text())
    fresh.update(version=1, status="active", prompt="Grade the answer.")
    fresh.pop("bridges_from")
    path.write_text(yaml.safe_dump(fresh, sort_keys=False))
    assert main(["--project", str(root), "validate"]) == 1
    err = capsys.readouterr().err
    assert (
        "judges/helpfulness-v1.yaml: prompt: judge 'helpfulness-v1' was deprecated (2026-03-01T00:00:00Z) and its "
        "id can never be reused with other content (prompt changed): give this judge a new version"
    ) in err


def test_recording_refuses_any_hard_problem_and_writes_nothing(root: Path) -> None:
    add_v2(root)  # recordable on its own ...
    edit(root / "judges" / "safety-v1.yaml", max_output_tokens=100)  # ... but this is not
    before = (root / REGISTRY_PATH).read_bytes()
    with pytest.raises(ConfigError) as raised:
        record(root)
    assert [p.field for p in raised.value.problems] == ["max_output_tokens"]
    assert (root / REGISTRY_PATH).read_bytes() == before


def test_a_deprecated_id_cannot_be_reused_with_other_content_even_while_still_deprecated(root: Path) -> None:
    deprecate_v1_behind_v2(root)
    path = root / "judges" / "helpfulness-v1.yaml"
    edit(path, prompt="Grade the answer.", max_output_tokens=100)  # status stays deprecated
    expected = [
        f"judges/helpfulness-v1.yaml: {field}: judge 'helpfulness-v1' was deprecated (2026-03-01T00:00:00Z) "
        f"and its id can never be reused with other content ({field} changed): give this judge a new version"
        for field in ("prompt", "max_output_tokens")
    ]
    assert problems(root) == expected
    before = (root / REGISTRY_PATH).read_bytes()
    with pytest.raises(ConfigError) as raised:
        record(root)
    assert [str(p) for p in raised.value.problems] == expected
    assert (root / REGISTRY_PATH).read_bytes() == before


def test_letting_the_judge_see_the_trajectory_changes_the_units_content_and_the_default_changes_nothing(
    project,
) -> None:
    """`judge_sees_trajectory: true` changes what the judge is shown, so it changes the rubric's content
    field and the unit's hash; left at its default it is not part of the content at all, so every version
    recorded before the flag existed keeps its hash."""
    judge = project.judges["helpfulness-v1"]
    rubric = project.rubric_for(judge)
    assert rubric.judge_sees_trajectory is False
    shown = rubric.model_copy(update={"judge_sees_trajectory": True})
    before, after = identity(judge, rubric), identity(judge, shown)
    assert "judge_sees_trajectory" not in before["rubric_content"]
    assert '"judge_sees_trajectory": true' in after["rubric_content"].replace('":true', '": true')
    assert {k for k in before if before[k] != after[k]} == {"rubric_content"}
    assert content_hash(judge, shown) != content_hash(judge, rubric)


def _hand_edit_content_hash(root: Path, vid: str) -> None:
    registry_file = root / REGISTRY_PATH
    data = yaml.safe_load(registry_file.read_text(encoding="utf-8"))
    old = data["judges"][vid]["content_hash"]
    data["judges"][vid]["content_hash"] = ("0" if old[0] != "0" else "1") + old[1:]
    registry_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def test_a_hand_edited_content_hash_with_no_field_hash_changed_is_refused(root: Path) -> None:
    _hand_edit_content_hash(root, "safety-v1")
    assert problems(root) == [
        "judges/safety-v1.yaml: version: judge 'safety-v1': its content hash changed since the version was "
        "recorded; a judge version is one unit: put the change in a new version (safety-v2, with "
        "`bridges_from: safety-v1`)"
    ]
    with pytest.raises(ConfigError):
        record(root)


def test_a_hand_edited_content_hash_of_a_deprecated_version_is_refused(root: Path) -> None:
    deprecate_v1_behind_v2(root)
    _hand_edit_content_hash(root, "helpfulness-v1")
    assert problems(root) == [
        "judges/helpfulness-v1.yaml: version: judge 'helpfulness-v1' was deprecated (2026-03-01T00:00:00Z) and "
        "its id can never be reused with other content (its content hash changed): give this judge a new version"
    ]


# --- what mutation testing found unpinned (docs/mutation.md) -------------------------------------------


def test_a_rubric_reference_change_does_not_hide_a_later_field_change(root: Path) -> None:
    rubric = yaml.safe_load((root / "rubrics" / "helpfulness-v1.yaml").read_text(encoding="utf-8"))
    (root / "rubrics" / "helpfulness-v2.yaml").write_text(yaml.safe_dump({**rubric, "version": 2}))
    edit(root / "judges" / "helpfulness-v1.yaml", rubric={"id": "helpfulness", "version": 2}, max_output_tokens=100)
    assert [p.split(": ")[1] for p in problems(root)] == ["rubric", "max_output_tokens"]


def test_a_field_hash_missing_from_the_registry_is_named_as_not_recorded(root: Path) -> None:
    registry_file = root / REGISTRY_PATH
    data = yaml.safe_load(registry_file.read_text(encoding="utf-8"))
    del data["judges"]["safety-v1"]["fields"]["params"]
    registry_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    edit(root / "judges" / "safety-v1.yaml", max_output_tokens=100)
    assert problems(root) == [
        f"judges/safety-v1.yaml: {field}: judge 'safety-v1': {what} since the version was recorded; a judge "
        "version is one unit: put the change in a new version (safety-v2, with `bridges_from: safety-v1`)"
        for field, what in (("params", "params was not recorded"), ("max_output_tokens", "max_output_tokens changed"))
    ]


def test_recording_over_a_malformed_registry_raises_its_problems(root: Path) -> None:
    (root / REGISTRY_PATH).write_text("scheme: 1\njudges: [\n")
    with pytest.raises(ConfigError) as raised:
        record(root)
    assert [p.field for p in raised.value.problems] == ["<yaml>"]


@pytest.fixture
def tokyo_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The machine's local zone is Asia/Tokyo for the test (UTC+9, no daylight saving)."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_recorded_stamps_are_utc_whatever_the_machine_zone_and_the_given_zone(root: Path, tokyo_clock: None) -> None:
    add_v2(root)
    assert record(root, datetime(2026, 3, 1, 1, 30, tzinfo=timezone(timedelta(hours=2)))) == [
        "helpfulness-v2: recorded (active)"
    ]
    entry = (read_registry(root)[0] or pytest.fail()).judges["helpfulness-v2"]
    assert [c.recorded_at for c in entry.status_history] == ["2026-02-28T23:30:00Z"]


def test_the_registry_is_written_in_its_declared_order_not_sorted(root: Path) -> None:
    add_v2(root)
    record(root)
    data = yaml.safe_load((root / REGISTRY_PATH).read_text(encoding="utf-8"))
    assert list(data) == ["scheme", "judges"]
    assert list(data["judges"]) == ["helpfulness-v1", "helpfulness-v2", "safety-v1"]
    for entry in data["judges"].values():
        assert list(entry) == ["name", "version", "content_hash", "fields", "status_history"]
        assert list(entry["fields"]) == list(IDENTITY_FIELDS)
        assert [list(change) for change in entry["status_history"]] == [["status", "recorded_at"]]


def test_identity_keeps_non_ascii_text_as_it_is_and_refuses_non_finite_numbers(project) -> None:
    judge = project.judges["helpfulness-v1"]
    rubric = project.rubric_for(judge)
    prompt = "Grade the answer \u2014 na\u00efvely is wrong. \u2713"
    assert identity(judge.model_copy(update={"prompt": prompt}), rubric)["prompt"] == f'"{prompt}"'
    with pytest.raises(ValueError, match="not JSON compliant"):
        identity(judge.model_copy(update={"params": {**judge.params, "temperature": math.nan}}), rubric)


def test_an_entry_that_was_never_deprecated_has_no_deprecation_time() -> None:
    active = StatusChange(status="active", recorded_at="2026-03-01T00:00:00Z")
    entry = RegistryEntry(name="x", version=1, content_hash="0" * 64, fields={}, status_history=[active])
    assert entry.deprecated_at() is None
    gone = StatusChange(status="deprecated", recorded_at="2026-04-01T00:00:00Z")
    assert entry.model_copy(update={"status_history": [active, gone]}).deprecated_at() == "2026-04-01T00:00:00Z"


def test_every_judge_with_a_problem_is_reported_not_only_the_first(root: Path) -> None:
    add_v2(root)  # unrecorded, and sorted before safety-v1
    edit(root / "judges" / "helpfulness-v1.yaml", max_output_tokens=100)
    edit(root / "judges" / "safety-v1.yaml", max_output_tokens=100)
    assert [p.split(": ")[:2] for p in problems(root)] == [
        ["judges/helpfulness-v1.yaml", "max_output_tokens"],
        ["judges/helpfulness-v2.yaml", "version"],
        ["judges/safety-v1.yaml", "max_output_tokens"],
    ]


def test_a_deprecated_judge_does_not_stop_the_judges_after_it_being_checked(root: Path) -> None:
    deprecate_v1_behind_v2(root)  # helpfulness-v1, deprecated and unchanged, sorts first
    edit(root / "judges" / "safety-v1.yaml", max_output_tokens=100)
    assert [": ".join(p.split(": ")[:2]) for p in problems(root)] == ["judges/safety-v1.yaml: max_output_tokens"]


def test_a_judge_with_a_dangling_rubric_does_not_stop_the_others_being_checked(root: Path) -> None:
    edit(root / "judges" / "helpfulness-v1.yaml", rubric={"id": "helpfulness", "version": 9})
    edit(root / "judges" / "safety-v1.yaml", max_output_tokens=100)
    assert "judges/safety-v1.yaml: max_output_tokens" in [": ".join(p.split(": ")[:2]) for p in problems(root)]


def test_a_rubric_edited_in_place_under_a_deprecated_version_is_named(root: Path) -> None:
    deprecate_v1_behind_v2(root)
    edit(root / "rubrics" / "helpfulness-v1.yaml", floor=0.25)  # v1 and v2 both use it
    assert problems(root)[0] == (
        "judges/helpfulness-v1.yaml: rubric: judge 'helpfulness-v1' was deprecated (2026-03-01T00:00:00Z) and its "
        "id can never be reused with other content (the content of rubric 'helpfulness' version 1 changed): give "
        "this judge a new version"
    )


def test_a_deprecated_judge_does_not_stop_bridge_checks_of_later_judges(root: Path) -> None:
    deprecate_v1_behind_v2(root)  # helpfulness-v1 (deprecated) sorts first
    v1 = yaml.safe_load((root / "judges" / "safety-v1.yaml").read_text(encoding="utf-8"))
    (root / "judges" / "safety-v2.yaml").write_text(yaml.safe_dump({**v1, "version": 2, "prompt": "Be safe.\n"}))
    assert any(p.startswith("judges/safety-v2.yaml: bridges_from: judge 'safety-v2' is a new") for p in problems(root))


def test_a_missing_bridge_lists_every_earlier_version_recorded_or_not(root: Path) -> None:
    add_v2(root)  # loaded, not recorded
    add_v3 = yaml.safe_load((root / "judges" / "helpfulness-v2.yaml").read_text(encoding="utf-8"))
    add_v3.update(version=3, prompt="Grade it.\n")
    add_v3.pop("bridges_from")
    (root / "judges" / "helpfulness-v3.yaml").write_text(yaml.safe_dump(add_v3))
    assert (
        "judges/helpfulness-v3.yaml: bridges_from: judge 'helpfulness-v3' is a new active version of 'helpfulness', "
        "which already has helpfulness-v1, helpfulness-v2: declare `bridges_from: helpfulness-v2` (a bridge run "
        "publishes the offset)"
    ) in problems(root)


def test_problems_name_the_judge_file_where_it_actually_is(root: Path) -> None:
    (root / "judges" / "archive").mkdir()
    moved = root / "judges" / "archive" / "old-safety.yaml"
    (root / "judges" / "safety-v1.yaml").rename(moved)
    edit(moved, max_output_tokens=100)
    assert [p.split(": ")[0] for p in problems(root)] == ["judges/archive/old-safety.yaml"]


def test_a_recorded_judge_whose_name_no_file_uses_any_more_still_validates(root: Path) -> None:
    registry_file = root / REGISTRY_PATH
    data = yaml.safe_load(registry_file.read_text(encoding="utf-8"))
    data["judges"]["retired-v1"] = {**copy.deepcopy(data["judges"]["safety-v1"]), "name": "retired"}
    registry_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    assert sorted(load_project(root).judges) == ["helpfulness-v1", "safety-v1"]

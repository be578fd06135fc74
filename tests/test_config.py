"""The config loader: the shipped example suite loads, and every kind of broken input is reported.

The bad-input corpus lives in tests/bad_config/ (its README.md explains the layout): each case is a
small overlay on a valid base project, broken in exactly one way, with the exact problem lines the
loader must print.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from invariants.bad_config import assemble_cases

from eval_assets.config import ConfigError, Judge, Rubric, Scenario, load_build, load_file, load_project
from eval_assets.providers.simmodel import POLICY_VIOLATION_TEXT

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).resolve().parent / "bad_config"
BASE = CORPUS / "_base"
CASES = sorted(d.name for d in CORPUS.iterdir() if d.is_dir() and not d.name.startswith("_"))
BUILD_FILE = "build.yaml"  # a case holding this file is a build-manifest case
EXAMPLE_BUILDS = sorted((REPO / "examples" / "builds").glob("*.yaml"))


# --- helpers ---------------------------------------------------------------------------------------


def assemble(cases: list[str], dest: Path) -> Path:
    """Copy the base project to `dest`, then apply each case: overlay its files, delete remove.txt paths."""
    return assemble_cases(BASE, [CORPUS / name for name in cases], dest)


def expected_lines(name: str) -> list[str]:
    """The case's expected problem lines (`#` lines are the case's description; blanks are ignored)."""
    text = (CORPUS / name / "expected.txt").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def printed_lines(root: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Load the project (and build.yaml, if present, by its relative path) and return the problem lines."""
    monkeypatch.chdir(root)  # a build manifest is shown by the path it was given: keep it `build.yaml`
    with pytest.raises(ConfigError) as raised:
        project = load_project(root)
        if (root / BUILD_FILE).exists():
            load_build(Path(BUILD_FILE), project)
    error = raised.value
    assert str(error).splitlines() == [str(p) for p in error.problems]
    return [str(p) for p in error.problems]


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under `root`: file contents, or None for a directory."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))
    }


def shipped_project_copy(dest: Path) -> Path:
    """The checked-in configuration (and example builds) copied to `dest`."""
    for sub in ("rubrics", "judges", "scenarios", "examples"):
        shutil.copytree(REPO / sub, dest / sub)
    shutil.copyfile(REPO / "evaltrack.yaml", dest / "evaltrack.yaml")
    return dest


# --- the bad-input corpus --------------------------------------------------------------------------


def test_corpus_base_project_is_valid_so_each_case_breaks_exactly_what_it_overlays():
    project = load_project(BASE)
    assert sorted(project.scenarios) == ["demo.hello"]


def test_every_bad_config_case_lists_the_lines_it_expects():
    assert CASES
    for name in CASES:
        assert expected_lines(name), f"{name}/expected.txt lists no problem line"


@pytest.mark.parametrize("case", CASES)
def test_broken_config_is_refused_and_prints_each_expected_problem_line(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    root = assemble([case], tmp_path / "project")
    printed = printed_lines(root, monkeypatch)
    missing = [line for line in expected_lines(case) if line not in printed]
    assert missing == [], "printed:\n" + "\n".join(printed)


def test_every_problem_is_reported_not_just_the_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    independent = ["repeats-below-two", "judge-unknown-rubric-version", "price-model-without-provider-prefix"]
    root = assemble(independent, tmp_path / "project")
    lines = printed_lines(root, monkeypatch)
    assert sorted(lines) == sorted(line for case in independent for line in expected_lines(case))
    assert len(lines) == 3


@pytest.mark.parametrize(
    "broken", ["rubrics/quality-v1.yaml", "judges/grader-v1.yaml"], ids=["rubric", "judge"]
)
def test_an_invalid_file_is_reported_once_not_again_as_a_dangling_reference(
    broken: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    root = assemble([], tmp_path / "project")
    with (root / broken).open("a", encoding="utf-8") as f:
        f.write("owner: evals-team\n")  # one unknown field; the file's id and version are still readable
    lines = printed_lines(root, monkeypatch)
    assert lines == [f"{broken}: owner: unknown field"]


# --- loading is read-only --------------------------------------------------------------------------


def test_loading_the_project_and_builds_writes_nothing(tmp_path: Path):
    root = shipped_project_copy(tmp_path / "project")
    before = snapshot(root)
    project = load_project(root)
    for manifest in sorted((root / "examples" / "builds").glob("*.yaml")):
        load_build(manifest, project)
    assert snapshot(root) == before


def test_refusing_a_broken_project_writes_nothing(tmp_path: Path):
    root = assemble(["scenario-unknown-judge", "unknown-model-provider"], tmp_path / "project")
    before = snapshot(root)
    with pytest.raises(ConfigError):
        load_project(root)
    assert snapshot(root) == before


# --- the shipped example suite (`project`: conftest's session fixture, the checked-in project) -------


def test_shipped_project_loads_with_two_rubrics_one_active_judge_each_and_three_suites(project):
    assert len(project.rubrics) == 2
    assert sorted(j.rubric.id for j in project.active_judges) == sorted(
        r.id for r in project.rubrics.values()
    )
    assert {s.suite for s in project.scenarios.values() if s.source == "authored"} >= {"coding", "safety", "support"}
    for judge in project.active_judges:
        assert project.scenarios_judged_by(judge), f"{judge.version_id} scores no scenario"


def test_shipped_rubrics_cover_bounded_int_label_and_bool_scales(project):
    kinds = {c.scale.type for r in project.rubrics.values() for c in r.criteria}
    assert {"int", "labels", "bool"} <= kinds


@pytest.mark.parametrize("manifest", EXAMPLE_BUILDS, ids=lambda p: p.stem)
def test_example_build_loads_against_the_shipped_project(manifest: Path, project):
    from eval_assets.providers.sim import SUBJECT_KNOBS  # imports litellm (~10 s): only when needed

    build = load_build(manifest, project)
    assert build.subject.model in project.settings.prices
    assert set(build.subject.params) <= SUBJECT_KNOBS


def test_example_rebuild_and_candidate_compare_against_the_baseline(project):
    builds = {p.stem: load_build(p, project) for p in EXAMPLE_BUILDS}
    assert set(builds) == {"baseline", "rebuild", "candidate"}
    assert builds["baseline"].baseline is None
    assert builds["rebuild"].baseline == builds["candidate"].baseline == builds["baseline"].id
    same = {k: v for k, v in builds["baseline"].subject.params.items() if k != "seed"}
    rebuild = {k: v for k, v in builds["rebuild"].subject.params.items() if k != "seed"}
    assert rebuild == same, "the rebuild must change nothing but its seed"


def test_example_candidate_regresses_only_scenarios_that_exist(project):
    candidate = load_build(REPO / "examples" / "builds" / "candidate.yaml", project)
    overrides = candidate.subject.params["scenario_skill"]
    assert len(overrides) == 3
    assert set(overrides) <= set(project.scenarios)
    assert all(skill < candidate.subject.params["skill"] for skill in overrides.values())


def test_every_shipped_scenario_forbids_the_text_a_sim_policy_violation_leaks(project):
    missing = [
        s.id for s in project.scenarios.values() if POLICY_VIOLATION_TEXT not in s.policy.forbidden_strings
    ]
    assert missing == []


def test_every_shipped_judge_model_has_a_price_and_known_sim_knobs(project):
    from eval_assets.providers.sim import JUDGE_KNOBS

    for judge in project.judges.values():
        assert judge.model in project.settings.prices, judge.version_id
        # temperature is an ordinary decoding param, which the sim accepts and ignores
        assert set(judge.params) <= JUDGE_KNOBS | {"temperature"}, judge.version_id


def test_shipped_files_are_named_for_what_they_hold():
    for path in sorted((REPO / "judges").glob("*.yaml")):
        if path.name == "registry.yaml":  # judge governance: the identity registry, not a judge
            continue
        judge, _ = load_file(Judge, path)
        assert judge is not None and path.name == f"{judge.version_id}.yaml"
    for path in sorted((REPO / "rubrics").glob("*.yaml")):
        rubric, _ = load_file(Rubric, path)
        assert rubric is not None and path.name == f"{rubric.key}.yaml"
    for path in sorted((REPO / "scenarios").rglob("*.yaml")):
        scenario, _ = load_file(Scenario, path)
        assert scenario is not None
        assert path.relative_to(REPO).as_posix() == f"scenarios/{scenario.suite}/{scenario.id}.yaml"


# --- one validation for validate, build add and the code location ----------------------------------


def test_sim_knob_models_name_exactly_the_knobs_the_sim_provider_reads():
    from eval_assets.config import SimJudgeKnobs, SimSubjectKnobs
    from eval_assets.providers.simmodel import DECODING_PARAMS, JUDGE_KNOBS, SUBJECT_KNOBS

    assert set(SimSubjectKnobs.model_fields) == SUBJECT_KNOBS | DECODING_PARAMS
    assert set(SimJudgeKnobs.model_fields) == JUDGE_KNOBS | DECODING_PARAMS


@pytest.mark.parametrize(
    "cron",
    [
        "every tuesday",
        "@daily",
        "0 2 * * * *",
        "60 * * * *",
        "0 24 * * *",
        "0 0 0 * *",
        "0 0 32 * *",
        "0 0 * 13 *",
        "0 2 * * 8",
        "0 0 30 2 *",
        "0 0 L * *",
        "0 0 * * sun#2",
        "*/0 * * * *",
        "a-b * * * *",
        "",
    ],
)
def test_a_cron_the_settings_accept_is_one_dagster_schedules(cron: str):
    from dagster._utils.schedules import is_valid_cron_string

    from eval_assets.config import cron_problem

    if cron_problem(cron) is None:
        assert is_valid_cron_string(cron), cron
    else:
        assert cron_problem(cron)


@pytest.mark.parametrize(
    "cron", ["0 2 * * *", "*/15 * * * *", "0 2 * * mon-fri", "1-5/2 0,12 1 jan,jul *", "0 0 * * 7"]
)
def test_ordinary_crons_are_accepted_and_dagster_agrees(cron: str):
    from dagster._utils.schedules import is_valid_cron_string

    from eval_assets.config import cron_problem

    assert cron_problem(cron) is None and is_valid_cron_string(cron)


def test_example_builds_name_a_baseline_among_the_examples_and_a_stray_one_is_refused(
    tmp_path: Path, project
):
    examples = tmp_path / "builds"
    examples.mkdir()
    for path in EXAMPLE_BUILDS:
        shutil.copyfile(path, examples / path.name)
    for path in sorted(examples.glob("*.yaml")):
        load_build(path, project)  # the baseline is one of the examples beside it
    (examples / "baseline.yaml").unlink()
    with pytest.raises(ConfigError) as raised:
        load_build(examples / "candidate.yaml", project)
    assert [p.field for p in raised.value.problems] == ["baseline"]
    assert "unknown baseline build" in raised.value.problems[0].message


# --- the one YAML reader ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "issue"),
    [
        (
            "a: &x [1, 2]\nb: *x\n",
            ("<yaml>", "YAML anchors (&x) are not allowed: write the value out (line 1, column 4)"),
        ),
        (
            "a: [1]\nb: *x\n",
            ("<yaml>", "YAML aliases (*x) are not allowed: write the value out (line 2, column 4)"),
        ),
        (
            "<<: {a: 1}\n",
            ("<yaml>", "YAML merge keys (<<) are not allowed: write the keys out (line 1, column 1)"),
        ),
        ("a: 1\nb: 2\na: 3\n", ("<yaml>", "key 'a' is given twice in one mapping (line 3, column 1)")),
        (
            "a: !!binary aGk=\n",
            (
                "<yaml>",
                "YAML tag 'tag:yaml.org,2002:binary' is not allowed (plain data only) (line 1, column 4)",
            ),
        ),
        (
            "a: !!set {x}\n",
            (
                "<yaml>",
                "YAML tag 'tag:yaml.org,2002:set' is not allowed (plain data only) (line 1, column 4)",
            ),
        ),
        (
            "a: !custom x\n",
            ("<yaml>", "YAML tag '!custom' is not allowed (plain data only) (line 1, column 4)"),
        ),
        ("a: {b: [1, .NaN]}\n", ("a.b.1", ".nan is not a finite number")),
        ("a: -.Inf\n", ("a", "-.inf is not a finite number")),
        ("[" * 100_000, ("<yaml>", "nested deeper than 64 levels (line 1, column 65)")),
    ],
)
def test_the_yaml_reader_refuses_what_is_not_plain_bounded_data(text: str, issue: tuple[str, str]):
    from eval_assets.config import YamlRefused, parse_yaml

    with pytest.raises(YamlRefused) as raised:
        parse_yaml(text)
    assert raised.value.issues[0] == issue


def test_the_yaml_reader_keeps_dates_as_text_and_reads_a_bom(tmp_path: Path):
    from eval_assets.config import read_yaml_file

    path = tmp_path / "x.yaml"
    path.write_bytes("\ufeffday: 2026-01-05\nn: 3\n".encode())
    assert read_yaml_file(path) == {"day": "2026-01-05", "n": 3}


def test_the_yaml_reader_refuses_a_file_over_the_cap_before_parsing_it(tmp_path: Path):
    from eval_assets.config import MAX_YAML_BYTES, YamlRefused, read_yaml_file

    path = tmp_path / "big.yaml"
    path.write_bytes(b"a: [" + b"1," * (MAX_YAML_BYTES // 2) + b"]\n")
    with pytest.raises(YamlRefused) as raised:
        read_yaml_file(path)
    size = path.stat().st_size
    assert raised.value.issues == [
        ("<file>", f"the file is {size} bytes, over the cap of {MAX_YAML_BYTES} bytes")
    ]


def test_no_module_parses_yaml_but_the_one_reader():
    offenders = [
        f"{path.relative_to(REPO)}:{n}"
        for path in sorted((REPO / "eval_assets").rglob("*.py"))
        if path.name != "_yaml.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if "yaml.safe_load" in line or "yaml.load(" in line or "yaml.full_load" in line
    ]
    assert offenders == []

"""Fail-closed corpus for bad input (issue 11, items 5, 6, 7 and the file-size caps of item 10).

Each case is a reproduction from the issue, run through the real CLI (`evaltrack ...`, in process) on a
copy of the shipped project and a throwaway EVAL_HOME, with its expected outcome: the exact
`path: field: message` line printed, exit 1, and nothing written (EVAL_HOME and --out unchanged).
Every case fails on the code before the fix (a traceback, exit 0, a silent default, or a write).
Item 6's cases also check that `validate`, `build add`, and a run (what the code location's assets and
sensor call, `Track.build`) print the same line; `test_code_location_refuses_...` loads the code
location itself in a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from eval_assets import cli
from eval_assets.capability.materialize import materialize_scenario_runs
from eval_assets.capability.track import Track
from eval_assets.config import load_project
from eval_assets.home import EvalHome

REPO = Path(__file__).resolve().parents[2]
PROJECT_PARTS = ("rubrics", "judges", "scenarios", "examples", "gates", "docs")
BASELINE = "agent-2026-11-28-base"

# 456 bytes: each level repeats the one above nine times (9**8 = 43 million strings once expanded).
ALIAS_BOMB = (
    "id: bomb\nmilestone: 1\nsubject:\n  model: sim/agent\n  family: sim\n  params:\n"
    "    a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    + "".join(
        f"    {x}: &{x} [{', '.join([f'*{p}'] * 9)}]\n" for p, x in zip("abcdef", "bcdefg", strict=True)
    )
    + "    h: [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
)


@dataclass
class Env:
    root: Path
    home: Path
    capsys: pytest.CaptureFixture[str]

    def run(self, *args: str) -> tuple[int, list[str]]:
        """`evaltrack --project ROOT --home HOME ARGS...`: exit code and stderr lines."""
        self.capsys.readouterr()
        code = cli.main(["--project", str(self.root), "--home", str(self.home), *args])
        return code, self.capsys.readouterr().err.splitlines()

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def edit(self, rel: str, change: Callable[[str], str]) -> None:
        path = self.root / rel
        text = path.read_text(encoding="utf-8")
        assert change(text) != text, f"{rel}: the case changed nothing"
        path.write_text(change(text), encoding="utf-8")


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and directory (None) under `root`. Left out: SQLite's -wal/-shm sidecars and
    the DuckDB catalog `warehouse.duckdb`, which holds views only and is re-created when a command opens
    the warehouse (its bytes differ each time; the data under warehouse/data/ is compared)."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
        if not p.name.endswith(("-wal", "-shm")) and p.name != "warehouse.duckdb"
    }


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fail-closed") / "project"
    for part in PROJECT_PARTS:
        shutil.copytree(REPO / part, root / part)
    shutil.copyfile(REPO / "evaltrack.yaml", root / "evaltrack.yaml")
    return root


@pytest.fixture
def env(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> Env:
    root = tmp_path / "project"
    shutil.copytree(template, root)
    home = tmp_path / "home"
    monkeypatch.setenv("LITELLM_OFFLINE_MODE", "true")
    monkeypatch.setenv("EVAL_HOME", str(home))  # the CLI sets both; monkeypatch restores them
    monkeypatch.setenv("EVAL_PROJECT_ROOT", str(root))
    Track(load_project(root), EvalHome(home))  # the home exists before a case: "nothing written" is exact
    return Env(root, home, capsys)


# --- item 5: one YAML reader, bounded ---------------------------------------------------------------


def test_the_456_byte_alias_bomb_manifest_is_refused_and_nothing_is_registered(env: Env) -> None:
    assert len(ALIAS_BOMB.encode()) == 456
    bomb = env.write("bomb.yaml", ALIAS_BOMB)
    before = snapshot(env.home)
    code, err = env.run("build", "add", str(bomb))
    assert code == 1
    assert (
        err[0] == f"{bomb}: <yaml>: YAML anchors (&a) are not allowed: write the value out (line 7, column 8)"
    )
    assert snapshot(env.home) == before


def test_an_alias_in_a_scenario_is_refused_by_validate(env: Env) -> None:
    rel = "scenarios/coding/coding.fix-off-by-one.yaml"
    env.edit(rel, lambda t: t.replace("description:", "x: &d 1\ndescription:", 1))
    code, err = env.run("validate")
    assert code == 1
    assert f"{rel}: <yaml>: YAML anchors (&d) are not allowed: write the value out (line " in "\n".join(err)


def test_a_yaml_file_over_the_size_cap_is_refused_before_it_is_parsed(env: Env) -> None:
    from eval_assets.config import MAX_YAML_BYTES

    rel = "scenarios/coding/coding.fix-off-by-one.yaml"
    env.edit(rel, lambda t: t + "# " + "x" * MAX_YAML_BYTES + "\n")
    size = (env.root / rel).stat().st_size
    code, err = env.run("validate")
    assert code == 1
    assert f"{rel}: <file>: the file is {size} bytes, over the cap of {MAX_YAML_BYTES} bytes" in err


# --- item 6: validate, build add and the code location agree -------------------------------------------

# (case id, file, edit, expected line): project files, refused by `validate` and `build add` alike.
PROJECT_CASES = [
    (
        "cron-not-cron",
        "evaltrack.yaml",
        lambda t: t + "nightly_cron: 'every tuesday'\n",
        "evaltrack.yaml: nightly_cron: 'every tuesday' is not a cron expression: "
        "expected 5 fields (minute hour day month weekday)",
    ),
    (
        "price-inf",
        "evaltrack.yaml",
        lambda t: t.replace("input_per_mtok: 3.0", "input_per_mtok: .inf", 1),
        "evaltrack.yaml: prices.sim/agent.input_per_mtok: .inf is not a finite number",
    ),
    (
        "day-ceiling-nan",
        "evaltrack.yaml",
        lambda t: t.replace("day_ceiling_usd: 50.0", "day_ceiling_usd: .nan", 1),
        "evaltrack.yaml: spend.day_ceiling_usd: .nan is not a finite number",
    ),
    (
        "weight-inf",
        "rubrics/helpfulness-v1.yaml",
        lambda t: t.replace("weight: 3", "weight: .inf", 1),
        "rubrics/helpfulness-v1.yaml: criteria.0.weight: .inf is not a finite number",
    ),
    (
        "float-scale-bound-inf",
        "rubrics/helpfulness-v1.yaml",
        lambda t: t.replace(
            "scale: {type: int, min: 1, max: 5}", "scale: {type: float, min: 0.0, max: .inf}", 1
        ),
        "rubrics/helpfulness-v1.yaml: criteria.0.scale.max: .inf is not a finite number",
    ),
    (
        "label-order-unproven",
        "rubrics/safety-compliance-v1.yaml",
        lambda t: t.replace(
            "{harmful: 0.0, evasive: 0.5, appropriate: 1.0}", "{appropriate: 1.0, harmful: 0.0, evasive: 0.5}"
        ),
        "rubrics/safety-compliance-v1.yaml: criteria.0.scale: labels: list the labels worst to best with "
        "strictly increasing values ('harmful': 0.0 follows 'appropriate': 1.0): the judge is shown them in this order",
    ),
    (
        "forbidden-string-empty",
        "scenarios/coding/coding.fix-off-by-one.yaml",
        lambda t: t.replace(
            '    - "-----BEGIN PRIVATE KEY-----"', '    - "-----BEGIN PRIVATE KEY-----"\n    - ""', 1
        ),
        "scenarios/coding/coding.fix-off-by-one.yaml: policy.forbidden_strings.1: String should have at least 1 character",
    ),
    (
        "repeats-bool",
        "scenarios/coding/coding.fix-off-by-one.yaml",
        lambda t: t.replace("repeats: 5 ", "repeats: true", 1),
        "scenarios/coding/coding.fix-off-by-one.yaml: repeats: expected an integer, got true",
    ),
    (
        "judge-sim-noise-nan",
        "judges/helpfulness-v1.yaml",
        lambda t: t.replace("noise: 0.3", "noise: .nan", 1),
        "judges/helpfulness-v1.yaml: params.noise: .nan is not a finite number",
    ),
]


@pytest.mark.parametrize(("case", "rel", "change", "line"), PROJECT_CASES, ids=[c[0] for c in PROJECT_CASES])
def test_a_bad_project_file_is_refused_alike_by_validate_and_build_add(
    env: Env, case: str, rel: str, change: Callable[[str], str], line: str
) -> None:
    env.edit(rel, change)
    before = snapshot(env.home)
    code, err = env.run("validate")
    assert code == 1 and line in err, err
    code, err = env.run("build", "add", str(env.root / "examples/builds/baseline.yaml"))
    assert code == 1 and line in err, err
    assert not any("Traceback" in e for e in err)
    assert snapshot(env.home) == before


def test_yml_and_upper_case_yaml_files_are_refused_by_name_not_ignored(env: Env) -> None:
    src = env.root / "scenarios/coding/coding.fix-off-by-one.yaml"
    shutil.copyfile(src, env.root / "scenarios/coding/extra.YAML")
    shutil.copyfile(env.root / "examples/builds/rebuild.yaml", env.root / "examples/builds/other.yml")
    code, err = env.run("validate")
    assert code == 1
    assert "scenarios/coding/extra.YAML: <file>: only .yaml files are read: rename it to extra.yaml" in err
    (env.root / "scenarios/coding/extra.YAML").unlink()
    code, err = env.run("validate")
    assert code == 1
    assert "examples/builds/other.yml: <file>: only .yaml files are read: rename it to other.yaml" in err


def _manifest(**params: object) -> str:
    merged = {"skill": 0.7, "noise": 0.1, "seed": 3, **params}
    return (
        "id: agent-x\nmilestone: 4\n"
        f"subject:\n  model: sim/agent\n  family: sim\n  params: {json.dumps(merged)}\n"
        f"baseline: {BASELINE}\n"
    )


# (case id, manifest text, expected `field: message`): build manifests.
BUILD_CASES = [
    ("seed-abc", _manifest(seed="abc"), 'subject.params.seed: expected an integer, got "abc"'),
    ("skill-true", _manifest(skill=True), "subject.params.skill: expected a number, got true"),
    ("skill-7", _manifest(skill=7), "subject.params.skill: Input should be less than or equal to 1"),
    (
        "skill-nan",
        _manifest().replace('"skill": 0.7', '"skill": .nan'),
        "subject.params.skill: .nan is not a finite number",
    ),
    (
        "error-rate-bool",
        _manifest(error_rate=False),
        "subject.params.error_rate: expected a number, got false",
    ),
    (
        "latency-inf",
        _manifest().replace('"seed": 3', '"seed": 3, "latency_ms": .inf'),
        "subject.params.latency_ms: .inf is not a finite number",
    ),
    (
        "milestone-true",
        _manifest().replace("milestone: 4", "milestone: true"),
        "milestone: expected an integer, got true",
    ),
    (
        "baseline-unregistered",
        _manifest().replace(BASELINE, "agent-never-added"),
        "baseline: unknown baseline build 'agent-never-added': register the baseline first "
        "(`evaltrack build add`); known builds: " + BASELINE,
    ),
]


def _head(line: str) -> str:
    """A problem line without its list of known builds (which differs between the three paths)."""
    return line.split("; known builds")[0]


@pytest.mark.parametrize(("case", "text", "problem"), BUILD_CASES, ids=[c[0] for c in BUILD_CASES])
def test_a_bad_manifest_is_refused_alike_by_build_add_validate_and_a_run(
    env: Env, case: str, text: str, problem: str
) -> None:
    assert env.run("build", "add", str(env.root / "examples/builds/baseline.yaml"))[0] == 0
    manifest = env.write("x.yaml", text)
    before = snapshot(env.home)
    code, err = env.run("build", "add", str(manifest))
    assert code == 1 and f"{manifest}: {problem}" in err, err
    assert snapshot(env.home) == before
    # validate: the same manifest among the examples (its baseline is one of them)
    example = env.write("examples/builds/x.yaml", text)
    code, err = env.run("validate")
    # the known builds differ (there: the examples), the rest of the line is the same
    assert code == 1 and f"{example}: {problem}".split("; known builds")[0] in [
        e.split("; known builds")[0] for e in err
    ]
    # the code location's path: a manifest in EVAL_HOME/builds that never went through `build add`
    stored = env.home / "builds" / "agent-x.yaml"
    shutil.copyfile(manifest, stored)
    before = snapshot(env.home)
    code, err = env.run("run", "--build", "agent-x")
    assert code == 1 and _head(f"{stored}: {problem}") in [_head(e) for e in err], err
    assert snapshot(env.home) == before


def test_code_location_refuses_a_bad_project_with_the_validate_line(env: Env) -> None:
    env.edit("evaltrack.yaml", lambda t: t + "nightly_cron: 'every tuesday'\n")
    done = subprocess.run(
        [sys.executable, "-c", "from eval_assets.definitions import defs; defs()"],
        capture_output=True,
        text=True,
        env={**os.environ, "EVAL_PROJECT_ROOT": str(env.root), "EVAL_HOME": str(env.home)},
        timeout=600,
    )
    assert done.returncode != 0
    assert "eval-track configuration is invalid:" in done.stderr
    assert (
        "evaltrack.yaml: nightly_cron: 'every tuesday' is not a cron expression: "
        "expected 5 fields (minute hour day month weekday)"
    ) in done.stderr.splitlines()


# --- item 7: scores import, trajectory convert, run: messages, not tracebacks ---------------------------


@pytest.fixture(scope="module")
def scored_home(template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An EVAL_HOME with the baseline registered and its scenario_runs stored (the sim, no Dagster)."""
    home = tmp_path_factory.mktemp("scored") / "home"
    track = Track(load_project(template), EvalHome(home))
    track.register_build(template / "examples/builds/baseline.yaml")
    materialize_scenario_runs(track, BASELINE, "runs-1")
    return home


@pytest.fixture
def scores(env: Env, scored_home: Path) -> Env:
    shutil.rmtree(env.home)
    shutil.copytree(scored_home, env.home)
    return env


HEADER = "build,scenario_id,repeat,judge_version,author,correctness,completeness,clarity"


def _refused(env: Env, args: list[str], expected: list[str]) -> None:
    before = snapshot(env.home)
    code, err = env.run(*args)
    assert code == 1, err
    assert [line for line in expected if line not in err] == [], err
    assert not any("Traceback" in e for e in err)
    assert snapshot(env.home) == before


def test_scores_import_repeat_written_as_a_superscript_digit(scores: Env) -> None:
    path = scores.write("s.csv", f"{HEADER}\n{BASELINE},coding.fix-off-by-one,³,helpfulness-v1,ana,5,4,3\n")
    _refused(
        scores, ["scores", "import", str(path)], ['s.csv:2: repeat: expected an integer >= 1, got "\\u00b3"']
    )


def test_scores_import_lone_surrogate_in_author(scores: Env) -> None:
    row = {
        "build": BASELINE,
        "scenario_id": "coding.fix-off-by-one",
        "repeat": 1,
        "judge_version": "helpfulness-v1",
        "author": "ana",
        "criteria": {"correctness": 5, "completeness": 4, "clarity": 3},
    }
    path = scores.write("s.jsonl", json.dumps(row).replace('"ana"', '"ana\\udc80"') + "\n")
    _refused(
        scores,
        ["scores", "import", str(path)],
        ["s.jsonl:1: author: holds a lone surrogate (an unpaired \\ud800-\\udfff escape): not text"],
    )


def test_scores_import_a_utf8_bom_simply_works(scores: Env) -> None:
    path = scores.root / "bom.csv"
    path.write_bytes(
        b"\xef\xbb\xbf" + f"{HEADER}\n{BASELINE},coding.fix-off-by-one,1,helpfulness-v1,ana,5,4,3\n".encode()
    )
    code, err = scores.run("scores", "import", str(path))
    assert code == 0, err


def test_scores_import_reports_every_criterion_problem_of_a_row(scores: Env) -> None:
    path = scores.write(
        "s.csv", f"{HEADER},tone\n{BASELINE},coding.fix-off-by-one,1,helpfulness-v1,ana,0,9,x,4\n"
    )
    _refused(
        scores,
        ["scores", "import", str(path)],
        [
            "s.csv:2: criteria: unknown criterion: tone",
            "s.csv:2: criteria: criterion correctness: 0 is outside 1..5",
            "s.csv:2: criteria: criterion completeness: 9 is outside 1..5",
            's.csv:2: criteria: criterion clarity: expected an integer, got "x"',
        ],
    )


def test_scores_import_credentials_in_author(scores: Env) -> None:
    key = "sk-live-" + "7Qx2" * 6
    path = scores.write(
        "s.csv", f"{HEADER}\n{BASELINE},coding.fix-off-by-one,1,helpfulness-v1,ana {key},5,4,3\n"
    )
    _refused(
        scores,
        ["scores", "import", str(path)],
        ["s.csv:2: author: looks like a credential (an API key (sk-/pk-/rk-...)): a name never holds one"],
    )
    assert key not in scores.capsys.readouterr().err


def test_scores_import_file_over_the_configured_cap(scores: Env) -> None:
    scores.edit("evaltrack.yaml", lambda t: t + "bounds: {max_human_scores_bytes: 64}\n")
    path = scores.write("s.csv", f"{HEADER}\n{BASELINE},coding.fix-off-by-one,1,helpfulness-v1,ana,5,4,3\n")
    size = path.stat().st_size
    _refused(
        scores,
        ["scores", "import", str(path)],
        [
            f"s.csv: <file>: the file is {size} bytes, over the cap of 64 bytes (bounds.max_human_scores_bytes in evaltrack.yaml)"
        ],
    )


HEADER_LINE = '{"format": "agent-trajectory-export", "version": 1, "redacted": true}'


def test_trajectory_convert_json_nested_100k_deep(env: Env) -> None:
    export = env.write("export.jsonl", HEADER_LINE + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    out = env.root / "converted"
    _refused(
        env,
        ["trajectory", "convert", str(export), "--out", str(out)],
        [f"{export}:2: JSON nested deeper than 48 levels"],
    )
    assert not out.exists()


def test_trajectory_convert_out_pointing_at_an_existing_file(env: Env) -> None:
    out = env.write("notes.txt", "a person's notes\n")
    args = ["trajectory", "convert", str(REPO / "examples/trajectories/export.jsonl"), "--out", str(out)]
    _refused(env, args, [f"{out}: --out is an existing file, not a directory: nothing was overwritten"])
    assert out.read_text(encoding="utf-8") == "a person's notes\n"


def test_trajectory_convert_export_over_the_configured_cap(env: Env) -> None:
    env.edit("evaltrack.yaml", lambda t: t + "bounds: {max_trajectory_bytes: 1000}\n")
    export = REPO / "examples/trajectories/export.jsonl"
    out = env.root / "converted"
    size = export.stat().st_size
    _refused(
        env,
        ["trajectory", "convert", str(export), "--out", str(out)],
        [
            f"{export}: cannot read the export: the export is {size} bytes, over the cap of 1000 bytes "
            "(bounds.max_trajectory_bytes in evaltrack.yaml)"
        ],
    )
    assert not out.exists()


def _make_unwritable(path: Path) -> Callable[[], None]:
    """Make `path` unwritable even for root (chmod, then the immutable flag); returns the undo."""
    path.chmod(0o444)
    undo = [lambda: path.chmod(0o644)]
    try:
        path.open("r+b").close()
        writable = True
    except PermissionError:
        writable = False
    if writable and shutil.which("chattr"):
        if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0:
            undo.insert(0, lambda: subprocess.run(["chattr", "-i", str(path)], check=True))
            writable = False
    if writable:
        for step in undo:
            step()
        pytest.skip("cannot make a file unwritable here (root without chattr)")

    def restore() -> None:
        for step in undo:
            step()

    return restore


def test_run_with_a_read_only_journal_is_refused_up_front(env: Env) -> None:
    assert env.run("build", "add", str(env.root / "examples/builds/baseline.yaml"))[0] == 0
    from eval_assets.spend import journal_file, journal_url, open_journal

    open_journal(journal_url(env.home)).close()
    journal = journal_file(journal_url(env.home))
    assert journal is not None
    restore = _make_unwritable(journal)
    try:
        before = snapshot(env.home)
        code, err = env.run("run", "--build", BASELINE)
        after = snapshot(env.home)
    finally:
        restore()
    assert code == 1
    assert err == [
        f"error: the SQLite journal {journal} is read-only (attempt to write a readonly database): make it "
        "(and its directory) writable, or set spend.journal_url in evaltrack.yaml to a writable journal"
    ]
    assert after == before

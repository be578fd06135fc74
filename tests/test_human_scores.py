"""Human scores: validated against the rubric like verdicts, append-only, retractions as rows, agreement.

One build's scenario_runs are materialized once per module (sim, a few seconds); each test gets its
own copy of that EVAL_HOME, so imports never leak between tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from shared import BASELINE, baseline_home, full_row, track_on_copy

from eval_assets.capability.track import Track
from eval_assets.config import Project
from eval_assets.human_scores import HumanScoreError, import_scores, judge_agreement, score_id
from eval_assets.stats import krippendorff_alpha_interval
from eval_assets.warehouse import Warehouse

BUILD = BASELINE
HEADER = "build,scenario_id,repeat,judge_version,rubric,author,retracts,correctness,completeness,clarity"
# A JSONL row that imports (repeat 1 of a helpfulness scenario): each test spoils a copy of it.
GOOD_JSONL_ROW = {
    "build": BUILD,
    "scenario_id": "coding.fix-off-by-one",
    "repeat": 1,
    "judge_version": "helpfulness-v1",
    "author": "ana",
    "criteria": {"correctness": 5, "completeness": 4, "clarity": 3},
}


@pytest.fixture(scope="module")
def template(project: Project, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return baseline_home(project, tmp_path_factory.mktemp("human-template") / "eval_home", judged=False)


@pytest.fixture
def track(project: Project, template: Path, tmp_path: Path) -> Track:
    return track_on_copy(project, template, tmp_path)


def problem_lines(error: HumanScoreError) -> list[str]:
    """The refusal's problems as the lines `evaltrack scores import` prints."""
    return [str(p) for p in error.problems]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def rows(track: Track, view: str = "human_scores") -> pd.DataFrame:
    return track.warehouse.query(f"SELECT * FROM {view} ORDER BY imported_from, line")


def data_files(track: Track) -> list[str]:
    return sorted(
        str(p.relative_to(track.warehouse.data))
        for p in (track.warehouse.data / "human_scores").rglob("*.parquet")
        if "_schema" not in p.parts
    )


GOOD_CSV = (
    f"{HEADER}\n"
    f"{BUILD},coding.fix-off-by-one,1,helpfulness-v1,,ana,,5,4,3\n"
    f"{BUILD},coding.fix-off-by-one,2,,helpfulness-v1,ana,,2,2,1\n"
    f"{BUILD},support.refund-policy,1,helpfulness-v1,helpfulness-v1,ben,,4,4,4\n"
)


# --- a good file ----------------------------------------------------------------------------------------


def test_a_good_csv_appends_rows_marked_human_with_the_rubric_aggregate(track: Track, tmp_path: Path) -> None:
    out = import_scores(track, write(tmp_path, "scores.csv", GOOD_CSV), "import-1")
    assert {k: out[k] for k in ("rows", "appended", "skipped_existing", "retractions", "builds")} == {
        "rows": 3,
        "appended": 3,
        "skipped_existing": 0,
        "retractions": 0,
        "builds": [BUILD],
    }
    got = rows(track)
    assert list(got["line"]) == [2, 3, 4]
    assert set(got["source"]) == {"human"} and set(got["rubric"]) == {"helpfulness-v1"}
    assert list(got["judge_version"].fillna("-")) == ["helpfulness-v1", "-", "helpfulness-v1"]
    assert json.loads(got["criteria"].iloc[0]) == {"correctness": 5, "completeness": 4, "clarity": 3}
    assert got["score"].iloc[0] == pytest.approx((3 * 1.0 + 2 * 0.75 + 1 * 0.5) / 6)
    assert list(got["attempt_id"]) == [
        f"{BUILD}/coding.fix-off-by-one/1",
        f"{BUILD}/coding.fix-off-by-one/2",
        f"{BUILD}/support.refund-policy/1",
    ]
    assert len(data_files(track)) == 1  # one new file per import and build


def test_importing_the_same_file_twice_does_not_duplicate_rows(track: Track, tmp_path: Path) -> None:
    path = write(tmp_path, "scores.csv", GOOD_CSV)
    import_scores(track, path, "import-1")
    files = data_files(track)
    again = import_scores(track, path, "import-2")
    assert (again["appended"], again["skipped_existing"], again["partition_files"]) == (0, 3, [])
    assert len(rows(track)) == 3 and data_files(track) == files


def test_a_second_good_file_appends_without_touching_the_first(track: Track, tmp_path: Path) -> None:
    import_scores(track, write(tmp_path, "a.csv", GOOD_CSV), "import-1")
    first = data_files(track)
    more = f"{HEADER}\n{BUILD},coding.fix-off-by-one,3,helpfulness-v1,,cara,,3,3,3\n"
    assert import_scores(track, write(tmp_path, "b.csv", more), "import-2")["appended"] == 1
    assert set(first) < set(data_files(track))
    assert len(rows(track)) == 4


def test_identical_rows_within_a_file_are_stored_once(track: Track, tmp_path: Path) -> None:
    line = f"{BUILD},coding.fix-off-by-one,1,helpfulness-v1,,ana,,5,4,3\n"
    out = import_scores(track, write(tmp_path, "dup.csv", HEADER + "\n" + line + line), "import-1")
    assert (out["appended"], out["duplicates_in_file"]) == (1, 1)


def test_jsonl_with_label_and_bool_criteria_validates_against_the_safety_rubric(
    track: Track, tmp_path: Path
) -> None:
    text = "\n".join(
        json.dumps(r)
        for r in [
            {
                "build": BUILD,
                "scenario_id": "safety.credential-exfiltration",
                "repeat": 1,
                "judge_version": "safety-v1",
                "author": "ana",
                "criteria": {"refusal_quality": "appropriate", "follows_policy": True},
            },
            {
                "build": BUILD,
                "scenario_id": "safety.customer-pii-lookup",
                "repeat": 2,
                "rubric": "safety-compliance-v1",
                "author": "ben",
                "criteria": {"refusal_quality": "evasive", "follows_policy": False},
            },
        ]
    )
    assert import_scores(track, write(tmp_path, "s.jsonl", text + "\n\n"), "import-1")["appended"] == 2
    assert list(rows(track)["score"]) == pytest.approx([1.0, 1 / 3])


def test_csv_label_and_bool_cells_are_read_as_labels_and_json_booleans(track: Track, tmp_path: Path) -> None:
    header = "build,scenario_id,repeat,judge_version,author,refusal_quality,follows_policy"
    good = f"{header}\n{BUILD},safety.customer-pii-lookup,1,safety-v1,ana,harmful,true\n"
    assert import_scores(track, write(tmp_path, "ok.csv", good), "i")["appended"] == 1
    bad = f"{header}\n{BUILD},safety.customer-pii-lookup,2,safety-v1,ana,harmful,True\n"
    with pytest.raises(HumanScoreError) as raised:
        import_scores(track, write(tmp_path, "bad.csv", bad), "i")
    assert problem_lines(raised.value) == [
        'bad.csv:2: criteria: criterion follows_policy: expected true or false, got "True"'
    ]


# --- a bad file is rejected whole -------------------------------------------------------------------------


def test_a_bad_row_rejects_the_whole_file_with_line_numbers_and_writes_nothing(
    track: Track, tmp_path: Path
) -> None:
    text = (
        f"{HEADER},tone\n"
        f"{BUILD},coding.fix-off-by-one,1,helpfulness-v1,,ana,,5,4,3,\n"  # good
        f"{BUILD},coding.fix-off-by-one,2,helpfulness-v1,,ana,,5,4,3,4\n"  # unknown criterion
        f"{BUILD},coding.fix-off-by-one,3,helpfulness-v1,,ana,,7,4,3,\n"  # out of range
    )
    with pytest.raises(HumanScoreError) as raised:
        import_scores(track, write(tmp_path, "bad.csv", text), "import-1")
    assert problem_lines(raised.value) == [
        "bad.csv:3: criteria: unknown criterion: tone",
        "bad.csv:4: criteria: criterion correctness: 7 is outside 1..5",
    ]
    assert data_files(track) == [] and rows(track).empty


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        (
            {"build": "never-registered"},
            "build: unknown build 'never-registered': register it with `evaltrack build add`",
        ),
        ({"scenario_id": "coding.nope"}, "scenario_id: unknown scenario 'coding.nope'"),
        ({"repeat": 99}, f"repeat: no stored attempt {BUILD}/coding.fix-off-by-one/99 in scenario_runs"),
        ({"repeat": 0}, "repeat: expected an integer >= 1, got 0"),
        ({"repeat": True}, "repeat: expected an integer >= 1, got true"),
        ({"author": None}, "author: required field is missing"),
        ({"judge_version": "helpfulness-v9"}, "judge_version: unknown judge version 'helpfulness-v9'"),
        (
            {"judge_version": None},
            "judge_version: give judge_version or rubric (the rubric the scores follow)",
        ),
        (
            {"rubric": "safety-compliance-v1"},
            "rubric: 'safety-compliance-v1' is not the rubric of helpfulness-v1, which uses helpfulness-v1",
        ),
        (
            {"judge_version": "safety-v1"},
            "judge_version: scenario coding.fix-off-by-one is scored by judge 'helpfulness', not 'safety'",
        ),
        (
            {
                "judge_version": None,
                "rubric": "safety-compliance-v1",
                "criteria": {"refusal_quality": "harmful", "follows_policy": True},
            },
            "rubric: scenario coding.fix-off-by-one is not scored with rubric safety-compliance-v1",
        ),
        ({"criteria": {"correctness": 5, "completeness": 4}}, "criteria: missing criterion: clarity"),
        (
            {"criteria": {"correctness": "5", "completeness": 4, "clarity": 3}},
            'criteria: criterion correctness: expected an integer, got "5"',
        ),
        (
            {"criteria": {"correctness": 4.0, "completeness": 4, "clarity": 3}},
            "criteria: criterion correctness: expected an integer, got 4.0",
        ),
        ({"criteria": [5, 4, 3]}, "criteria: expected an object, got list"),
        ({"notes": "x"}, "notes: unknown field"),
        (
            {"retracts": "0123456789abcdef01234567"},
            "retracts: no earlier human score '0123456789abcdef01234567'",
        ),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_each_kind_of_bad_jsonl_row_is_reported_with_its_line(
    track: Track, tmp_path: Path, row: dict, problem: str
) -> None:
    good = GOOD_JSONL_ROW
    bad = {k: v for k, v in {**good, "repeat": 2, **row}.items() if v is not None}
    text = json.dumps(good) + "\n\n" + json.dumps(bad) + "\n"
    with pytest.raises(HumanScoreError) as raised:
        import_scores(track, write(tmp_path, "s.jsonl", text), "import-1")
    assert f"s.jsonl:3: {problem}" in problem_lines(raised.value), problem_lines(raised.value)
    assert data_files(track) == []


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{not json", "<row>: not valid JSON"),
        ('{"build": "a", "build": "b"}', "<row>: not valid JSON: duplicate key 'build'"),
        ("[1, 2]", "<row>: expected a JSON object, got list"),
    ],
    ids=["not-json", "duplicate-key", "not-an-object"],
)
def test_an_undecodable_jsonl_line_rejects_the_file(
    track: Track, tmp_path: Path, line: str, problem: str
) -> None:
    with pytest.raises(HumanScoreError) as raised:
        import_scores(track, write(tmp_path, "s.jsonl", line + "\n"), "import-1")
    assert problem_lines(raised.value)[0].startswith(f"s.jsonl:1: {problem}")


def test_csv_line_numbers_count_physical_lines_of_quoted_multiline_cells(
    track: Track, tmp_path: Path
) -> None:
    text = (
        "build,scenario_id,repeat,judge_version,author,correctness,completeness,clarity\n"
        f'{BUILD},coding.fix-off-by-one,1,helpfulness-v1,"ana\nfrom team b",5,4,3\n'
        f"{BUILD},coding.fix-off-by-one,2,helpfulness-v1,ana,5,4,0\n"
    )
    with pytest.raises(HumanScoreError) as raised:
        import_scores(track, write(tmp_path, "m.csv", text), "i")
    assert problem_lines(raised.value) == [
        "m.csv:2: author: holds an unprintable character (U+000A): a name is printable text",
        "m.csv:4: criteria: criterion clarity: 0 is outside 1..5",
    ]


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("s.txt", "x", "s.txt: <file>: expected a .csv or .jsonl file"),
        ("e.csv", "", "e.csv: <file>: no score rows"),
        ("h.csv", "build,build\nx,y\n", "h.csv:1: <header>: duplicate or empty column names: ['build']"),
        ("w.csv", f"{HEADER}\n{BUILD},x\n", "w.csv:2: <row>: 2 cells for 10 columns"),
    ],
    ids=["suffix", "empty", "duplicate-column", "ragged-row"],
)
def test_unreadable_files_are_rejected(
    track: Track, tmp_path: Path, name: str, text: str, problem: str
) -> None:
    with pytest.raises(HumanScoreError) as raised:
        import_scores(track, write(tmp_path, name, text), "i")
    assert problem_lines(raised.value) == [problem]


# --- retractions ----------------------------------------------------------------------------------------


def _first_id(track: Track) -> str:
    return str(rows(track)["score_id"].iloc[0])


def test_a_retraction_is_a_new_row_the_old_one_stays_readable_but_leaves_the_current_view(
    track: Track, tmp_path: Path
) -> None:
    import_scores(track, write(tmp_path, "a.csv", GOOD_CSV), "import-1")
    old = _first_id(track)
    text = f"{HEADER}\n{BUILD},coding.fix-off-by-one,1,helpfulness-v1,,ana,{old},,,\n"
    out = import_scores(track, write(tmp_path, "r.csv", text), "import-2")
    assert (out["appended"], out["retractions"]) == (1, 1)
    everything = rows(track)
    assert len(everything) == 4 and old in set(everything["score_id"])  # nothing deleted
    retraction = everything[everything["retracts"] == old].iloc[0]
    assert pd.isna(retraction["criteria"]) and pd.isna(retraction["score"])
    current = rows(track, "human_scores_current")
    assert old not in set(current["score_id"]) and len(current) == 2
    assert len(rows(track, "human_scores_history")) == 4


def test_a_retraction_with_criteria_is_a_correction(track: Track, tmp_path: Path) -> None:
    import_scores(track, write(tmp_path, "a.csv", GOOD_CSV), "import-1")
    old = _first_id(track)
    text = f"{HEADER}\n{BUILD},coding.fix-off-by-one,1,helpfulness-v1,,ana,{old},2,2,2\n"
    import_scores(track, write(tmp_path, "c.csv", text), "import-2")
    current = rows(track, "human_scores_current")
    fixed = current[current["retracts"] == old]
    assert len(current) == 3 and len(fixed) == 1
    assert json.loads(fixed["criteria"].iloc[0]) == {"clarity": 2, "completeness": 2, "correctness": 2}


def test_a_row_can_retract_an_earlier_row_of_the_same_file(track: Track, tmp_path: Path) -> None:
    first = {
        "build": BUILD,
        "scenario_id": "coding.fix-off-by-one",
        "repeat": 1,
        "rubric": "helpfulness-v1",
        "judge_version": None,
        "criteria": {"clarity": 3, "completeness": 4, "correctness": 5},
        "author": "ana",
        "retracts": None,
    }
    sid = score_id(first)
    text = f"{HEADER}\n{BUILD},coding.fix-off-by-one,1,,helpfulness-v1,ana,,5,4,3\n" + (
        f"{BUILD},coding.fix-off-by-one,1,,helpfulness-v1,ana,{sid},,,\n"
    )
    assert import_scores(track, write(tmp_path, "a.csv", text), "i")["retractions"] == 1
    assert rows(track, "human_scores_current").empty


@pytest.mark.parametrize("case", ["twice", "other-attempt", "a-retraction"])
def test_bad_retractions_reject_the_file(track: Track, tmp_path: Path, case: str) -> None:
    import_scores(track, write(tmp_path, "a.csv", GOOD_CSV), "import-1")
    old = _first_id(track)
    retract = f"{BUILD},coding.fix-off-by-one,1,helpfulness-v1,,ana,{old},,,\n"
    import_scores(track, write(tmp_path, "r.csv", HEADER + "\n" + retract), "import-2")
    before = data_files(track)
    if case == "twice":
        text, problem = (
            f"{HEADER}\n{BUILD},coding.fix-off-by-one,1,helpfulness-v1,,ben,{old},,,\n",
            "already retracted",
        )
    elif case == "other-attempt":
        second = str(rows(track)["score_id"].iloc[1])
        text, problem = (
            f"{HEADER}\n{BUILD},coding.fix-off-by-one,1,helpfulness-v1,,ana,{second},,,\n",
            "not this attempt",
        )
    else:
        pure = str(rows(track).query("retracts.notna()")["score_id"].iloc[0])
        text, problem = (
            f"{HEADER}\n{BUILD},coding.fix-off-by-one,1,helpfulness-v1,,ana,{pure},,,\n",
            "itself a retraction",
        )
    with pytest.raises(HumanScoreError) as raised:
        import_scores(track, write(tmp_path, "bad.csv", text), "import-3")
    assert len(problem_lines(raised.value)) == 1 and problem in problem_lines(raised.value)[0]
    assert problem_lines(raised.value)[0].startswith("bad.csv:2: retracts: ")
    assert data_files(track) == before


def test_reimporting_a_retraction_file_is_idempotent(track: Track, tmp_path: Path) -> None:
    import_scores(track, write(tmp_path, "a.csv", GOOD_CSV), "import-1")
    retract = write(
        tmp_path,
        "r.csv",
        f"{HEADER}\n{BUILD},coding.fix-off-by-one,1,helpfulness-v1,,ana,{_first_id(track)},,,\n",
    )
    import_scores(track, retract, "import-2")
    assert import_scores(track, retract, "import-3")["skipped_existing"] == 1
    assert len(rows(track)) == 4


# --- judge_agreement --------------------------------------------------------------------------------------


def _cohen_quadratic(a: np.ndarray, b: np.ndarray, k: int) -> float:
    """Cohen's quadratic-weighted kappa from the confusion matrix (categories 0..k-1)."""
    observed = np.zeros((k, k))
    for i, j in zip(a, b, strict=True):
        observed[i, j] += 1
    observed /= observed.sum()
    expected = np.outer(observed.sum(1), observed.sum(0))
    w = np.subtract.outer(np.arange(k), np.arange(k)) ** 2
    return float(1 - (w * observed).sum() / (w * expected).sum())


def _pairs_warehouse(
    tmp_path: Path, verdicts: list[dict[str, Any]], humans: list[dict[str, Any]]
) -> Warehouse:
    """A warehouse holding build b1's verdicts of judge g-v1 and its human scores (other columns None)."""
    wh = Warehouse(tmp_path / "wh")
    wh.initialise()
    wh.write_partition(
        "judge_verdicts",
        {"build": "b1", "judge_version": "g-v1"},
        [full_row("judge_verdicts", v) for v in verdicts],
        "r1",
    )
    wh.write_partition("human_scores", {"build": "b1"}, [full_row("human_scores", h) for h in humans], "r1")
    return wh


def _agreement_warehouse(tmp_path: Path, judge: np.ndarray, human: np.ndarray) -> Warehouse:
    n = len(judge)
    verdicts = [
        {
            "build": "b1",
            "judge_version": "g-v1",
            "scenario_id": f"s{i % 7}",
            "repeat": i,
            "rubric": "q-v1",
            "status": "scored",
            "score": judge[i] / 4,
        }
        for i in range(n)
    ]
    # a failed verdict and another rubric's verdict must not pair
    verdicts.append(
        {
            "build": "b1",
            "judge_version": "g-v1",
            "scenario_id": "s0",
            "repeat": n,
            "rubric": "q-v1",
            "status": "failed",
            "score": None,
        }
    )
    humans = [
        {
            "score_id": f"h{i}",
            "build": "b1",
            "scenario_id": f"s{i % 7}",
            "repeat": i,
            "rubric": "q-v1",
            "source": "human",
            "criteria": "{}",
            "score": human[i] / 4,
            "author": "ana",
        }
        for i in range(n)
    ]
    humans += [
        {
            "score_id": "hx",
            "build": "b1",
            "scenario_id": "s0",
            "repeat": 0,
            "rubric": "q-v1",
            "source": "human",
            "criteria": "{}",
            "score": 1.0,
            "author": "ben",
        },  # retracted below: must not count
        {
            "score_id": "hr",
            "build": "b1",
            "scenario_id": "s0",
            "repeat": 0,
            "rubric": "q-v1",
            "source": "human",
            "criteria": None,
            "score": None,
            "author": "ben",
            "retracts": "hx",
        },
        {
            "score_id": "hf",
            "build": "b1",
            "scenario_id": "s0",
            "repeat": n,
            "rubric": "q-v1",
            "source": "human",
            "criteria": "{}",
            "score": 0.5,
            "author": "ana",
        },  # its verdict failed
        {
            "score_id": "ho",
            "build": "b1",
            "scenario_id": "s0",
            "repeat": 0,
            "rubric": "other-v1",
            "source": "human",
            "criteria": "{}",
            "score": 0.0,
            "author": "ana",
        },  # another rubric
    ]
    return _pairs_warehouse(tmp_path, verdicts, humans)


def test_judge_agreement_view_matches_cohen_krippendorff_and_spearman_computed_independently(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(11)
    human = rng.integers(0, 5, size=60)
    judge = np.clip(human + rng.integers(-1, 2, size=60), 0, 4)
    got = judge_agreement(_agreement_warehouse(tmp_path, judge, human))
    assert list(got["judge_version"]) == ["g-v1"]
    row = got.iloc[0]
    assert (row["n"], row["n_attempts"], row["n_authors"], row["rubric"]) == (60, 60, 1, "q-v1")
    assert row["kappa_quadratic"] == pytest.approx(_cohen_quadratic(judge, human, 5))
    assert row["krippendorff_alpha"] == pytest.approx(
        krippendorff_alpha_interval(np.vstack([judge, human]) / 4)
    )
    assert row["spearman_rho"] == pytest.approx(stats.spearmanr(judge, human).statistic)


def test_judge_agreement_is_one_for_identical_scores_and_null_when_undefined(tmp_path: Path) -> None:
    same = np.array([0, 1, 2, 3, 4, 2, 1])
    row = judge_agreement(_agreement_warehouse(tmp_path / "a", same, same)).iloc[0]
    assert (row["kappa_quadratic"], row["krippendorff_alpha"], row["spearman_rho"]) == pytest.approx(
        (1, 1, 1)
    )
    flat = np.array([2, 2, 2])
    row = judge_agreement(_agreement_warehouse(tmp_path / "b", flat, flat)).iloc[0]
    assert row["n"] == 3
    assert (
        pd.isna(row["kappa_quadratic"])
        and pd.isna(row["krippendorff_alpha"])
        and pd.isna(row["spearman_rho"])
    )


# --- hostile and careless files (issue 11 item 7): a clear problem per row, nothing written ----------------


def test_a_repeat_written_with_a_non_ascii_digit_is_a_row_problem(track: Track, tmp_path: Path) -> None:
    text = f"{HEADER}\n{BUILD},coding.fix-off-by-one,³,helpfulness-v1,,ana,,5,4,3\n"
    with pytest.raises(HumanScoreError) as raised:
        import_scores(track, write(tmp_path, "sup.csv", text), "i")
    assert problem_lines(raised.value) == ['sup.csv:2: repeat: expected an integer >= 1, got "\\u00b3"']
    assert data_files(track) == []


def test_a_lone_surrogate_in_author_is_a_row_problem_that_prints(track: Track, tmp_path: Path) -> None:
    good = GOOD_JSONL_ROW
    row = json.dumps(good).replace('"ana"', '"ana\\ud800"') + "\n"  # JSON may escape a lone surrogate
    with pytest.raises(HumanScoreError) as raised:
        import_scores(track, write(tmp_path, "s.jsonl", row), "i")
    assert problem_lines(raised.value) == [
        "s.jsonl:1: author: holds a lone surrogate (an unpaired \\ud800-\\udfff escape): not text"
    ]
    str(raised.value).encode("utf-8")  # printable: the CLI writes it to stderr
    assert data_files(track) == []


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_column(track: Track, tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD_CSV.encode("utf-8"))
    assert import_scores(track, path, "i")["appended"] == 3
    jsonl = tmp_path / "bom.jsonl"
    good = {**GOOD_JSONL_ROW, "repeat": 3}
    jsonl.write_bytes(b"\xef\xbb\xbf" + json.dumps(good).encode("utf-8") + b"\n")
    assert import_scores(track, jsonl, "j")["appended"] == 1


def test_every_criterion_problem_of_a_row_is_reported_not_the_first(track: Track, tmp_path: Path) -> None:
    text = f"{HEADER},tone\n{BUILD},coding.fix-off-by-one,1,helpfulness-v1,,ana,,7,,x,4\n"
    with pytest.raises(HumanScoreError) as raised:
        import_scores(track, write(tmp_path, "many.csv", text), "i")
    assert problem_lines(raised.value) == [
        "many.csv:2: criteria: missing criterion: completeness",
        "many.csv:2: criteria: unknown criterion: tone",
        "many.csv:2: criteria: criterion correctness: 7 is outside 1..5",
        'many.csv:2: criteria: criterion clarity: expected an integer, got "x"',
    ]
    assert data_files(track) == []


@pytest.mark.parametrize(
    "author",
    [
        "ana " + "sk-" + "live-4f9a8b7c6d5e4f3a2b1c",  # credential-shaped values are built from parts
        "ana (pass" + "word=hunter2hunter2)",
        "AKIA" + "ABCDEFGHIJKLMNOP",
        "https://ana:" + "pw1234@example.com",
        "Bear" + "er abcdefghijklmnopqrstuvwxyz012345",
    ],
    ids=["sk-key", "password-assignment", "aws-key-id", "url-userinfo", "bearer"],
)
def test_a_credential_in_author_is_refused_without_echoing_it(
    track: Track, tmp_path: Path, author: str
) -> None:
    text = f'{HEADER}\n{BUILD},coding.fix-off-by-one,1,helpfulness-v1,,"{author}",,5,4,3\n'
    with pytest.raises(HumanScoreError) as raised:
        import_scores(track, write(tmp_path, "cred.csv", text), "i")
    assert len(problem_lines(raised.value)) == 1
    assert problem_lines(raised.value)[0].startswith("cred.csv:2: author: looks like a credential (")
    assert author not in str(raised.value)
    assert data_files(track) == []


def test_a_file_over_the_size_cap_is_refused_before_it_is_read(track: Track, tmp_path: Path) -> None:
    path = write(tmp_path, "big.csv", GOOD_CSV)
    size = path.stat().st_size
    with pytest.raises(HumanScoreError) as raised:
        import_scores(track, path, "i", max_bytes=size - 1)
    assert problem_lines(raised.value) == [
        f"big.csv: <file>: the file is {size} bytes, over the cap of {size - 1} bytes "
        "(bounds.max_human_scores_bytes in evaltrack.yaml)"
    ]
    assert data_files(track) == []
    assert import_scores(track, path, "j", max_bytes=size)["appended"] == 3


@pytest.mark.parametrize("bad", ["\\u0000", "\\u001b[31m", "\\u0007"], ids=["nul", "escape", "bell"])
def test_a_control_character_in_author_is_a_row_problem(track: Track, tmp_path: Path, bad: str) -> None:
    good = GOOD_JSONL_ROW
    row = json.dumps(good).replace('"ana"', f'"ana{bad}"') + "\n"
    with pytest.raises(HumanScoreError) as raised:
        import_scores(track, write(tmp_path, "s.jsonl", row), "i")
    [line] = problem_lines(raised.value)
    assert line.startswith("s.jsonl:1: author: holds an unprintable character (U+00")
    assert data_files(track) == []


def test_judge_agreement_per_criterion_pairs_each_criterion_and_matches_krippendorff_computed_independently(
    tmp_path: Path,
) -> None:
    """Criterion `a`: the human gives the judge's values (alpha 1); `b`: values that differ, alpha as the
    statistics module computes it; `c`: only the judge gives it (no pair, no row)."""
    rng = np.random.default_rng(5)
    a = rng.integers(1, 6, size=20)
    b_judge = rng.integers(1, 6, size=20)
    b_human = np.clip(b_judge + rng.integers(-1, 2, size=20), 1, 5)
    verdicts = [
        {
            "build": "b1",
            "judge_version": "g-v1",
            "scenario_id": f"s{i % 4}",
            "repeat": i,
            "rubric": "q-v1",
            "status": "scored",
            "score": 0.5,
            "criteria": json.dumps({"a": int(a[i]), "b": int(b_judge[i]), "c": 3}),
        }
        for i in range(20)
    ]
    humans = [
        {
            "score_id": f"h{i}",
            "build": "b1",
            "scenario_id": f"s{i % 4}",
            "repeat": i,
            "rubric": "q-v1",
            "source": "human",
            "criteria": json.dumps({"a": int(a[i]), "b": int(b_human[i])}),
            "score": 0.5,
            "author": "ana",
        }
        for i in range(20)
    ]
    wh = _pairs_warehouse(tmp_path, verdicts, humans)
    rows = wh.query("SELECT * FROM judge_agreement_criteria").set_index("criterion")
    assert list(rows.index) == ["a", "b"] and set(rows["n"]) == {20} and set(rows["rubric"]) == {"q-v1"}
    assert rows.loc["a", "krippendorff_alpha"] == pytest.approx(1.0)
    assert rows.loc["b", "krippendorff_alpha"] == pytest.approx(
        krippendorff_alpha_interval(np.vstack([b_judge, b_human]).astype(float))
    )

"""Fail closed: every malformed judge reply in tests/verdict_corpus/ is `failed`, with a reason, no value.

The corpus is data (eval_assets/judging_corpus.py documents its format); adding a case is adding a YAML
entry. `check_corpus` is the function a gate can call over any rubric.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_assets.config import Project, Rubric, load_project
from eval_assets.home import PROJECT_ROOT
from eval_assets.judging import parse_verdict
from eval_assets.judging_corpus import (
    ANY_RUBRIC,
    Case,
    CorpusError,
    check_corpus,
    load_corpus,
    valid_verdict,
)

CORPUS = Path(__file__).resolve().parent / "verdict_corpus"
CASES = load_corpus(CORPUS)
RUBRICS = load_project(PROJECT_ROOT).rubrics

# The kinds of malformed reply the issue and the brief name; each must have at least one case.
REQUIRED_KINDS = {
    "not JSON": "verdict-body-not-json",
    "two answers": "two-answers",
    "missing criterion": "missing-criterion",
    "extra criterion": "extra-criterion",
    "out of range": "out-of-range-high",
    "NaN": "nan",
    "Infinity": "infinity",
    "wrong label": "wrong-label",
    "number as string": "number-as-string",
    "bool for int": "bool-for-int",
    "float for int": "float-for-int",
    "empty reply": "empty-reply",
    "whitespace only": "whitespace-only",
    "truncated reply": "truncated-reply",
    "text after the verdict": "text-after-the-verdict",
    "verdict not an object": "verdict-is-a-list",
    "nested verdict": "nested-verdict-object",
    "duplicate keys": "duplicate-keys",
    "huge number": "huge-number-overflows-to-infinity",
    "negative": "negative",
    "null value": "null-value",
    "label case mismatch": "label-case-mismatch",
}


def _pairs() -> list[tuple[Case, Rubric]]:
    return [(c, r) for c in CASES for r in sorted(RUBRICS.values(), key=lambda r: r.key) if c.applies_to(r)]


def test_corpus_covers_every_named_kind_of_malformed_verdict() -> None:
    ids = {c.id for c in CASES}
    missing = {kind: case for kind, case in REQUIRED_KINDS.items() if case not in ids}
    assert missing == {}


def test_every_corpus_case_targets_a_shipped_rubric_or_any() -> None:
    assert {c.rubric for c in CASES} <= set(RUBRICS) | {ANY_RUBRIC}


@pytest.mark.parametrize(("case", "rubric"), _pairs(), ids=lambda x: x.id if isinstance(x, Case) else x.key)
def test_malformed_reply_fails_with_its_reason_and_records_no_value(case: Case, rubric: Rubric) -> None:
    verdict = parse_verdict(case.reply_for(rubric), rubric)
    assert verdict.status == "failed"
    assert verdict.score is None
    assert verdict.criteria is None
    assert verdict.failure_reason is not None and case.reason in verdict.failure_reason, verdict.failure_reason


@pytest.mark.parametrize("rubric", sorted(RUBRICS.values(), key=lambda r: r.key), ids=lambda r: r.key)
def test_placeholder_verdict_is_itself_valid_so_structural_cases_break_only_their_structure(
    rubric: Rubric,
) -> None:
    import json

    verdict = parse_verdict(f"reasoning\n<verdict>{json.dumps(valid_verdict(rubric))}</verdict>", rubric)
    assert verdict.status == "scored" and verdict.score == pytest.approx(1.0)


@pytest.mark.parametrize("rubric", sorted(RUBRICS.values(), key=lambda r: r.key), ids=lambda r: r.key)
def test_check_corpus_passes_for_every_shipped_rubric(rubric: Rubric) -> None:
    assert check_corpus(CORPUS, rubric) == []


def test_check_corpus_reports_a_reply_that_does_not_fail_closed(tmp_path: Path, project: Project) -> None:
    rubric = project.rubrics["helpfulness-v1"]
    corpus = tmp_path / "corpus.yaml"
    corpus.write_text(
        "- {id: actually-valid, rubric: '*', reply: '<verdict>${valid}</verdict>', reason: anything}\n"
        "- {id: wrong-reason, rubric: '*', reply: '', reason: truncated}\n"
    )
    failures = check_corpus(corpus, rubric)
    assert len(failures) == 2
    assert failures[0].startswith("actually-valid (helpfulness-v1): status is 'scored'")
    assert "score 1.0 recorded" in failures[0] and "criteria recorded" in failures[0]
    assert failures[1].startswith("wrong-reason (helpfulness-v1): reason 'empty reply'")


def test_check_corpus_reports_a_rubric_no_case_covers(tmp_path: Path, project: Project) -> None:
    corpus = tmp_path / "corpus.yaml"
    corpus.write_text("- {id: only-for-another, rubric: other-v9, reply: x, reason: y}\n")
    assert check_corpus(corpus, project.rubrics["helpfulness-v1"]) == [
        "no corpus case applies to rubric 'helpfulness-v1'"
    ]


@pytest.mark.parametrize(
    "text",
    [
        "- {id: a, rubric: '*', reply: x}\n",  # no reason
        "- {id: a, rubric: '*', reply: x, reason: y, colour: red}\n",  # unknown field
        "- {id: a, rubric: '*', reply: x, reason: y}\n- {id: a, rubric: '*', reply: z, reason: y}\n",
        "- just a string\n",
    ],
    ids=["missing-field", "unknown-field", "duplicate-id", "not-a-mapping"],
)
def test_malformed_corpus_is_refused_not_half_run(tmp_path: Path, text: str) -> None:
    corpus = tmp_path / "corpus.yaml"
    corpus.write_text(text)
    with pytest.raises(CorpusError):
        load_corpus(corpus)

"""The fail-closed corpus: malformed judge replies, each with the failure reason the parser must give.

A corpus is YAML: a file holding a list of cases, or a directory of such files. A case is

    - id: out-of-range-high          # unique across the corpus
      rubric: helpfulness-v1         # the rubric key it is written for, or "*" for any rubric
      reply: '<verdict>{"correctness": 6, ...}</verdict>'   # null: the judge returned no text
      reason: "criterion correctness: 6 is outside 1..5"    # a substring of the failure reason
      note: why this case exists     # optional

In a reply, `${valid}` stands for a VALID verdict object for the rubric under test (every numeric
criterion at its max, every bool true, every label scale's best label), so structural cases (two
answers, text after the verdict, nesting) are written once for every rubric. `${instructions}` and
`${example}` stand for what the judge prompt shows for that rubric (`judging.judge_instructions`,
`judging.example_verdict`), so echo cases follow the prompt as it is rendered today.

`check_corpus` is what a gate calls: every case that applies to the rubric must come back `failed`,
with its reason, no score and no criteria; a rubric no case applies to is itself a failure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_assets.config import BoolScale, FloatScale, IntScale, Rubric, YamlRefused, read_yaml_file
from eval_assets.judging import example_verdict, judge_instructions, parse_verdict

ANY_RUBRIC = "*"
VALID_PLACEHOLDER = "${valid}"
INSTRUCTIONS_PLACEHOLDER = "${instructions}"
EXAMPLE_PLACEHOLDER = "${example}"


class CorpusError(ValueError):
    """The corpus itself is malformed (not a list of cases, missing fields, duplicate ids)."""


@dataclass(frozen=True)
class Case:
    id: str
    rubric: str
    reply: str | None
    reason: str
    note: str = ""
    source: str = ""  # file the case came from

    def applies_to(self, rubric: Rubric) -> bool:
        return self.rubric in (ANY_RUBRIC, rubric.key)

    def reply_for(self, rubric: Rubric) -> str | None:
        """The reply with `${valid}` replaced by a valid verdict object for `rubric`, `${instructions}`
        by the renderer's instructions for it and `${example}` by the prompt's example verdict."""
        if self.reply is None:
            return None
        return (
            self.reply.replace(VALID_PLACEHOLDER, json.dumps(valid_verdict(rubric)))
            .replace(INSTRUCTIONS_PLACEHOLDER, judge_instructions(rubric))
            .replace(EXAMPLE_PLACEHOLDER, example_verdict(rubric))
        )


def valid_verdict(rubric: Rubric) -> dict[str, Any]:
    """A verdict object `rubric` accepts: numeric at max, bool true, label scales at their best label."""
    out: dict[str, Any] = {}
    for c in rubric.criteria:
        s = c.scale
        if isinstance(s, IntScale | FloatScale):
            out[c.name] = s.max
        elif isinstance(s, BoolScale):
            out[c.name] = True
        else:
            out[c.name] = list(s.labels)[-1]
    return out


_FIELDS = {"id", "rubric", "reply", "reason", "note"}


def _cases_in(path: Path) -> list[Case]:
    try:
        data = read_yaml_file(path)  # the one YAML reader
    except YamlRefused as exc:
        raise CorpusError(f"{path.name}: {exc}") from None
    items = data if isinstance(data, list) else [data]
    out = []
    for n, item in enumerate(items, start=1):
        where = f"{path.name} case {n}"
        if not isinstance(item, dict):
            raise CorpusError(f"{where}: expected a mapping, got {type(item).__name__}")
        unknown = sorted(set(item) - _FIELDS)
        missing = sorted({"id", "rubric", "reply", "reason"} - set(item))
        if unknown or missing:
            raise CorpusError(f"{where}: unknown fields {unknown}, missing fields {missing}")
        reply, reason = item["reply"], item["reason"]
        if reply is not None and not isinstance(reply, str):
            raise CorpusError(f"{where}: reply must be text or null")
        if not isinstance(reason, str) or not reason:
            raise CorpusError(f"{where}: reason must be a non-empty substring of the expected reason")
        out.append(
            Case(
                id=str(item["id"]),
                rubric=str(item["rubric"]),
                reply=reply,
                reason=reason,
                note=str(item.get("note") or ""),
                source=path.name,
            )
        )
    return out


def load_corpus(path: Path) -> list[Case]:
    """Every case in `path` (a YAML file, or a directory of *.yaml files read in name order).

    Raises CorpusError on a malformed case or a duplicate id: a gate must not run half a corpus.
    """
    files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
    cases = [c for f in files for c in _cases_in(f)]
    ids = [c.id for c in cases]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise CorpusError(f"duplicate case ids: {', '.join(dupes)}")
    return cases


def check_case(case: Case, rubric: Rubric) -> str | None:
    """Why `case` does not fail closed under `rubric` (None when it does)."""
    verdict = parse_verdict(case.reply_for(rubric), rubric)
    problems = []
    if verdict.status != "failed":
        problems.append(f"status is {verdict.status!r}, not 'failed'")
    if verdict.score is not None:
        problems.append(f"score {verdict.score} recorded")
    if verdict.criteria is not None:
        problems.append("criteria recorded")
    if verdict.failure_reason is None or case.reason not in verdict.failure_reason:
        problems.append(f"reason {verdict.failure_reason!r} does not contain {case.reason!r}")
    return f"{case.id} ({rubric.key}): " + "; ".join(problems) if problems else None


def check_corpus(path: Path, rubric: Rubric) -> list[str]:
    """One line per corpus case that does NOT fail closed under `rubric`; [] when all do.

    A rubric that no case applies to is reported as a failure (an unchecked rubric is not a pass).
    """
    cases = [c for c in load_corpus(path) if c.applies_to(rubric)]
    if not cases:
        return [f"no corpus case applies to rubric {rubric.key!r}"]
    return [why for c in cases if (why := check_case(c, rubric)) is not None]

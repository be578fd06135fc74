"""Human scores (docs/methods.md: human scores; scores are immutable): import, append-only storage, agreement.

`import_scores` reads a CSV or JSONL file of human scores, validates EVERY row against its rubric with
the verdict parser's own value checks (`judging.check_criteria`), and either rejects the whole file
(every problem listed with its line number; nothing written) or appends the new rows to the
append-only `human_scores` dataset (one new file per build touched) with `source = human`.

Row fields: build, scenario_id, repeat, judge_version and/or rubric (a rubric key such as
`helpfulness-v1`; with a judge version the rubric is that version's), author, optional retracts, and
the criterion values: a `criteria` object in JSONL, one column per criterion in CSV (an empty cell is
an absent criterion; a cell is read as JSON when it is a number, true/false or null, else as text, so
`4` is the integer 4 and `appropriate` the label).

Nothing updates or deletes a score. A retraction is a new row whose `retracts` is the score_id of an
earlier row of the SAME attempt; with no criteria it is a pure retraction, with criteria it is also a
corrected score. A retracted row stays readable in `human_scores` / `human_scores_history`;
`human_scores_current` leaves it (and pure retractions) out. A row cannot retract a pure retraction,
a row already retracted, or a row of another attempt.

score_id is a content hash of (build, scenario_id, repeat, rubric, judge_version, criteria, author,
retracts), so importing the same file again appends nothing: rows whose score_id is already stored
are skipped (and counted), as are exact duplicates within the file. The same author giving the same
values to the same attempt twice is one fact, stored once.

If writing the second of several build partitions fails, the first stays written; importing the same
file again appends only what is missing.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from eval_assets.config import Judge, Problem, ProblemsFound, Project, Rubric, has_lone_surrogate, read_capped
from eval_assets.judging import check_criteria, criteria_problems, strict_json
from eval_assets.redact import findings, name_problem
from eval_assets.warehouse import Warehouse

if TYPE_CHECKING:
    from eval_assets.capability.track import Track

SOURCE = "human"
KEY_FIELDS = ("build", "scenario_id", "repeat", "judge_version", "rubric", "author", "retracts")
JSONL_FIELDS = frozenset({*KEY_FIELDS, "criteria"})
SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


class HumanScoreError(ProblemsFound):
    """The file was rejected; `problems` has one `Problem` per problem (str: `FILE:LINE: field: message`)."""


@dataclass
class _Row:
    line: int
    fields: dict[str, Any]
    criteria: dict[str, Any]
    problems: list[tuple[str, str]] = field(default_factory=list)


# --- reading ---------------------------------------------------------------------------------------


def _cell(text: str) -> Any:
    """A CSV cell as a criterion value: JSON numbers, true/false and null decode; anything else is text."""
    try:
        value = strict_json(text)
    except (ValueError, RecursionError):
        return text
    return value if value is None or isinstance(value, bool | int | float) else text


def _read_csv(text: str) -> Iterator[_Row]:
    with io.StringIO(text, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return
        names = [h.strip() for h in header]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes or "" in names:
            yield _Row(1, {}, {}, [("<header>", f"duplicate or empty column names: {dupes or ['']}")])
            return
        start = reader.line_num
        for cells in reader:
            line, start = start + 1, reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(names):
                yield _Row(line, {}, {}, [("<row>", f"{len(cells)} cells for {len(names)} columns")])
                continue
            fields: dict[str, Any] = {}
            criteria: dict[str, Any] = {}
            for name, raw in zip(names, cells, strict=True):
                if not raw.strip():
                    continue
                if name in KEY_FIELDS:
                    fields[name] = raw.strip()
                else:
                    criteria[name] = _cell(raw.strip())
            yield _Row(line, fields, criteria)


def _read_jsonl(text: str) -> Iterator[_Row]:
    with io.StringIO(text) as f:
        for line, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                data = strict_json(text)
            except (ValueError, RecursionError) as exc:
                yield _Row(line, {}, {}, [("<row>", f"not valid JSON: {exc}")])
                continue
            if not isinstance(data, dict):
                yield _Row(line, {}, {}, [("<row>", f"expected a JSON object, got {type(data).__name__}")])
                continue
            row = _Row(line, {k: v for k, v in data.items() if k in KEY_FIELDS and v is not None}, {})
            for name in sorted(set(data) - JSONL_FIELDS):
                row.problems.append((name, "unknown field"))
            criteria = data.get("criteria")
            if isinstance(criteria, dict):
                row.criteria = criteria
            elif criteria is not None:
                row.problems.append(("criteria", f"expected an object, got {type(criteria).__name__}"))
            yield row


# --- text checks: what a score row may never carry into the warehouse ------------------------------------


def credential_shapes(text: str) -> list[str]:
    """What the one redaction (`eval_assets.redact`) would remove from `text`: its shape labels and the
    names of matching secret values (each once; never the value)."""
    return findings(text)


def _printable(text: str) -> str:
    """A problem line that can be printed and stored: a lone surrogate in it shows as its escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _problem(path: str, field: str, message: str, line: int = 0) -> Problem:
    """One reason the file is refused (`line` 0: the file as a whole), printable and storable."""
    return Problem(_printable(path), field, _printable(message), line)


def _text_problems(row: _Row) -> None:
    """A lone surrogate (not text: it cannot be stored) or a credential shape in any text of the row."""
    texts = [(k, v) for k, v in row.fields.items() if isinstance(v, str)]
    for name, value in row.criteria.items():
        texts.append((f"criteria.{name}", str(name)))
        if isinstance(value, str):
            texts.append((f"criteria.{name}", value))
    for where, text in texts:
        if has_lone_surrogate(text):
            row.problems.append(
                (where, "holds a lone surrogate (an unpaired \\ud800-\\udfff escape): not text")
            )
        elif where == "author" and (why := name_problem(text)) is not None:
            row.problems.append((where, why))
        elif found := credential_shapes(text):
            row.problems.append(
                (where, f"looks like a credential ({', '.join(found)}): a score file never holds one")
            )


# --- validation ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Context:
    project: Project
    builds: frozenset[str]
    attempts: frozenset[tuple[str, str, int]]
    stored: dict[str, dict[str, Any]]  # score_id -> {build, scenario_id, repeat, pure}
    retracted: dict[str, str]  # score_id -> score_id of the row retracting it


def _context(track: Track) -> _Context:
    wh = track.warehouse
    runs = wh.query("SELECT DISTINCT build, scenario_id, repeat FROM scenario_runs")
    stored = wh.query(
        "SELECT score_id, build, scenario_id, repeat, criteria IS NULL AS pure, retracts FROM human_scores_history"
    )
    return _Context(
        project=track.project,
        builds=frozenset(track.registered_builds()),
        attempts=frozenset((str(r.build), str(r.scenario_id), int(r.repeat)) for r in runs.itertuples()),
        stored={
            str(r.score_id): {
                "build": r.build,
                "scenario_id": r.scenario_id,
                "repeat": int(r.repeat),
                "pure": bool(r.pure),
            }
            for r in stored.itertuples()
        },
        retracted={
            str(r.retracts): str(r.score_id) for r in stored.itertuples() if isinstance(r.retracts, str)
        },
    )


def _text(row: _Row, name: str, required: bool) -> str | None:
    value = row.fields.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            row.problems.append((name, "required field is missing"))
        return None
    if not isinstance(value, str):
        row.problems.append((name, f"expected text, got {json.dumps(value)}"))
        return None
    return value.strip()


def _repeat(row: _Row) -> int | None:
    value = row.fields.get("repeat")
    if value is None:
        row.problems.append(("repeat", "required field is missing"))
        return None
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,9}", value.strip()):  # ASCII digits: not "³"
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        row.problems.append(("repeat", f"expected an integer >= 1, got {json.dumps(value)}"))
        return None
    return value


def _rubric_of(row: _Row, ctx: _Context, scenario_id: str | None) -> tuple[Rubric | None, Judge | None]:
    project = ctx.project
    jv = _text(row, "judge_version", required=False)
    rkey = _text(row, "rubric", required=False)
    judge = None
    if jv is None and rkey is None:
        row.problems.append(("judge_version", "give judge_version or rubric (the rubric the scores follow)"))
        return None, None
    if jv is not None:
        judge = project.judges.get(jv)
        if judge is None:
            row.problems.append(("judge_version", f"unknown judge version {jv!r}"))
            return None, None
    if rkey is not None and rkey not in project.rubrics:
        known = ", ".join(sorted(project.rubrics))
        row.problems.append(("rubric", f"unknown rubric {rkey!r} (rubric keys: {known})"))
        return None, judge
    rubric = project.rubric_for(judge) if judge is not None else project.rubrics[rkey or ""]
    if judge is not None and rkey is not None and rkey != rubric.key:
        row.problems.append(
            ("rubric", f"{rkey!r} is not the rubric of {judge.version_id}, which uses {rubric.key}")
        )
        return None, judge
    scenario = project.scenarios.get(scenario_id or "")
    if scenario is not None:
        if judge is not None and judge.name != scenario.judge:
            row.problems.append(
                (
                    "judge_version",
                    f"scenario {scenario.id} is scored by judge {scenario.judge!r}, not {judge.name!r}",
                )
            )
            return None, judge
        rubrics_of_scenario = {
            project.rubric_for(j).key for j in project.judges.values() if j.name == scenario.judge
        }
        if rubric.key not in rubrics_of_scenario:
            row.problems.append(("rubric", f"scenario {scenario.id} is not scored with rubric {rubric.key}"))
            return None, judge
    return rubric, judge


def score_id(record: dict[str, Any]) -> str:
    """The content hash identifying a human score row (24 hex digits of sha256 over canonical JSON)."""
    keys = ("build", "scenario_id", "repeat", "rubric", "judge_version", "criteria", "author", "retracts")
    body = json.dumps(
        {k: record.get(k) for k in keys}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    # surrogatepass: a row holding a lone surrogate is refused, but its id is computed before that
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def human_score_row(
    build: str | None,
    scenario_id: str | None,
    repeat: int | None,
    judge: Judge | None,
    rubric: Rubric | None,
    criteria: dict[str, Any] | None,
    score: float | None,
    author: str | None,
    retracts: str | None,
    imported_from: str,
    line: int,
) -> dict[str, Any]:
    """The one `human_scores` row of an imported line (`criteria` None: a pure retraction); its
    `score_id` is the content hash of the score (`score_id`)."""
    record: dict[str, Any] = {
        "build": build,
        "scenario_id": scenario_id,
        "repeat": repeat,
        "attempt_id": f"{build}/{scenario_id}/{repeat}",
        "judge_version": None if judge is None else judge.version_id,
        "rubric": None if rubric is None else rubric.key,
        "source": SOURCE,
        "criteria": None if criteria is None else json.dumps(criteria, sort_keys=True),
        "score": score,
        "author": author,
        "retracts": retracts,
        "imported_from": imported_from,
        "line": line,
    }
    return {"score_id": score_id({**record, "criteria": criteria}), **record}


def _validate(rows: list[_Row], ctx: _Context, name: str) -> tuple[list[dict[str, Any]], list[Problem]]:
    records: list[dict[str, Any]] = []
    in_file: dict[str, dict[str, Any]] = {}  # score_id -> attempt/pure, for rows earlier in this file
    retracted_here: dict[str, str] = {}
    for row in rows:
        if row.problems and row.problems[0][0].startswith("<"):
            continue  # the row could not be read (bad JSON, ragged CSV row): nothing more to check
        _text_problems(row)
        build = _text(row, "build", required=True)
        scenario_id = _text(row, "scenario_id", required=True)
        repeat = _repeat(row)
        author = _text(row, "author", required=True)
        retracts = _text(row, "retracts", required=False)
        if build is not None and build not in ctx.builds:
            row.problems.append(("build", f"unknown build {build!r}: register it with `evaltrack build add`"))
        if scenario_id is not None and scenario_id not in ctx.project.scenarios:
            row.problems.append(("scenario_id", f"unknown scenario {scenario_id!r}"))
        elif (
            build in ctx.builds
            and repeat is not None
            and scenario_id is not None
            and (build, scenario_id, repeat) not in ctx.attempts
        ):
            row.problems.append(
                ("repeat", f"no stored attempt {build}/{scenario_id}/{repeat} in scenario_runs")
            )
        rubric, judge = _rubric_of(row, ctx, scenario_id)
        values: dict[str, Any] | None = None
        score: float | None = None
        if row.criteria or retracts is None:
            if rubric is not None:
                found = criteria_problems(row.criteria, rubric)  # every problem of the row, not the first
                verdict = check_criteria(row.criteria, rubric)
                if found or verdict.status != "scored":
                    row.problems += [("criteria", p) for p in found or [str(verdict.failure_reason)]]
                else:
                    values, score = verdict.criteria, verdict.score
        record = human_score_row(
            build, scenario_id, repeat, judge, rubric, values, score, author, retracts, name, row.line
        )
        sid = record["score_id"]
        if retracts is not None:
            target = ctx.stored.get(retracts) or in_file.get(retracts)
            by = ctx.retracted.get(retracts) or retracted_here.get(retracts)
            if target is None:
                row.problems.append(("retracts", f"no earlier human score {retracts!r}"))
            elif (target["build"], target["scenario_id"], target["repeat"]) != (build, scenario_id, repeat):
                row.problems.append(
                    (
                        "retracts",
                        f"score {retracts!r} is for {target['build']}/{target['scenario_id']}/{target['repeat']}, "
                        "not this attempt",
                    )
                )
            elif target["pure"]:
                row.problems.append(("retracts", f"score {retracts!r} is itself a retraction"))
            elif by is not None and by != sid:
                row.problems.append(("retracts", f"score {retracts!r} is already retracted by {by!r}"))
            else:
                retracted_here[retracts] = sid
        if not row.problems:
            in_file.setdefault(
                sid, {"build": build, "scenario_id": scenario_id, "repeat": repeat, "pure": values is None}
            )
            records.append(record)
    problems = [_problem(name, fld, msg, row.line) for row in rows for fld, msg in row.problems]
    return records, problems


# --- the import --------------------------------------------------------------------------------------


def import_scores(track: Track, path: Path, run_id: str, max_bytes: int | None = None) -> dict[str, Any]:
    """Validate every row of `path` (CSV or JSONL) and append the new ones to `human_scores`.

    Raises HumanScoreError listing every bad row as `FILE:LINE: field: message` (unknown build,
    scenario, attempt, judge version, rubric or criterion; a value out of range or of the wrong type;
    a missing field; a bad `retracts`) and writes nothing. Otherwise appends the rows whose score_id
    is not stored yet, one file per build, and returns counts: rows, appended, skipped_existing,
    duplicates_in_file, retractions, builds, partition_files.
    """
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise HumanScoreError([_problem(path.name, "<file>", "expected a .csv or .jsonl file")])
    cap = track.project.settings.bounds.max_human_scores_bytes if max_bytes is None else max_bytes
    try:
        raw = read_capped(path, cap)
    except ValueError as exc:  # over the cap: refused before anything is parsed
        raise HumanScoreError(
            [_problem(path.name, "<file>", f"{exc} (bounds.max_human_scores_bytes in evaltrack.yaml)")]
        ) from None
    except OSError as exc:
        raise HumanScoreError(
            [_problem(path.name, "<file>", f"cannot read: {exc.strerror or exc}")]
        ) from None
    try:
        text = raw.decode("utf-8-sig")  # a UTF-8 byte order mark is not part of the first column's name
    except UnicodeDecodeError as exc:
        raise HumanScoreError([_problem(path.name, "<file>", f"not UTF-8 text (byte {exc.start})")]) from None
    try:
        rows = list(_read_csv(text) if kind == "csv" else _read_jsonl(text))
    except csv.Error as exc:
        raise HumanScoreError([_problem(path.name, "<file>", f"cannot read: {exc}")]) from None
    if not rows:
        raise HumanScoreError([_problem(path.name, "<file>", "no score rows")])
    ctx = _context(track)
    records, problems = _validate(rows, ctx, path.name)
    if problems:
        raise HumanScoreError(problems)
    return _append(track, ctx, records, run_id)


def record_score(
    track: Track,
    *,
    build: str,
    scenario_id: str,
    repeat: int,
    judge_version: str | None,
    author: str,
    criteria: dict[str, Any],
    origin: str,
    run_id: str,
    rubric: str | None = None,
) -> dict[str, Any]:
    """One human score given outside a file (the review queue), validated exactly as an imported row
    (rubric values with the verdict parser's checks, the attempt, the author, no credential) and
    appended to `human_scores` with `imported_from = origin`. The score is under `rubric`, or under
    `judge_version`'s rubric (both given: they must agree), as for an imported row. Idempotent: the
    same values by the same author for the same attempt are one score_id, stored once. Raises
    HumanScoreError (nothing written). Returns the import's counts plus `score_id`."""
    fields = {
        "build": build,
        "scenario_id": scenario_id,
        "repeat": repeat,
        "judge_version": judge_version,
        "rubric": rubric,
        "author": author,
    }
    fields = {k: v for k, v in fields.items() if v is not None}
    ctx = _context(track)
    records, problems = _validate([_Row(1, fields, dict(criteria))], ctx, origin)
    if problems:
        raise HumanScoreError(problems)
    return {**_append(track, ctx, records, run_id), "score_id": records[0]["score_id"]}


def _append(track: Track, ctx: _Context, records: list[dict[str, Any]], run_id: str) -> dict[str, Any]:
    stored = set(ctx.stored)
    fresh: list[dict[str, Any]] = []
    seen: set[str] = set()
    skipped = duplicates = 0
    for rec in records:
        if rec["score_id"] in stored:
            skipped += 1
        elif rec["score_id"] in seen:
            duplicates += 1
        else:
            seen.add(rec["score_id"])
            fresh.append(rec)
    files = []
    for build in sorted({r["build"] for r in fresh}):
        part = [r for r in fresh if r["build"] == build]
        files.append(str(track.warehouse.write_partition("human_scores", {"build": build}, part, run_id)))
    return {
        "rows": len(records),
        "appended": len(fresh),
        "skipped_existing": skipped,
        "duplicates_in_file": duplicates,
        "retractions": sum(1 for r in fresh if r["retracts"] is not None),
        "builds": sorted({r["build"] for r in fresh}),
        "partition_files": files,
    }


def judge_agreement(warehouse: Warehouse) -> pd.DataFrame:
    """The `judge_agreement` view: per judge version, n, kappa_quadratic, krippendorff_alpha,
    spearman_rho against the current human scores of the same attempts (see warehouse.DERIVED_VIEWS)."""
    return warehouse.query("SELECT * FROM judge_agreement")


def _alpha_text(row: Any) -> str:
    """alpha with its interval as a report shows it (undefined and interval-less cases said in words)."""
    if pd.isna(row.krippendorff_alpha):
        return "alpha undefined (under 2 pairs or no spread)"
    text = f"alpha {row.krippendorff_alpha:.3f}"
    if pd.isna(row.alpha_lo):
        return text + " (no interval: one scenario)"
    return text + f" [{row.alpha_lo:.3f}, {row.alpha_hi:.3f}]"


def agreement_markdown(warehouse: Warehouse, judge_version: str) -> str:
    """The report's lines on how `judge_version` agrees with people: from the `judge_agreement` and
    `judge_agreement_criteria` views (Krippendorff's interval alpha with its 95% cluster-bootstrap
    interval over scenarios), on the score and per criterion, with the pairs and scenarios behind it.
    Says so when no human score of the version's rubric pairs with its verdicts."""
    score = warehouse.query("SELECT * FROM judge_agreement WHERE judge_version = ?", [judge_version])
    if score.empty:
        return f"**Judge-human agreement** ({judge_version}): no human score pairs with its verdicts yet.\n"
    row = next(score.itertuples())
    line = (
        f"**Judge-human agreement** ({judge_version}, rubric {row.rubric}): score {_alpha_text(row)}, "
        f"95% cluster bootstrap over {row.n_scenarios} scenarios, {row.n} pairs ({row.n_review} from review)"
    )
    criteria = warehouse.query(
        "SELECT * FROM judge_agreement_criteria WHERE judge_version = ? ORDER BY criterion", [judge_version]
    )
    parts = [f"{r.criterion} {_alpha_text(r)}" for r in criteria.itertuples()]
    return line + ".\n" + (f"Per criterion: {'; '.join(parts)}.\n" if parts else "")

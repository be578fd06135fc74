"""What the review queue routes to people, what a reviewer sees, and what a submitted score becomes.

`fill` enqueues, from the warehouse, for each build: the verdicts that failed (status `failed`, with
an output to score), a seeded sample of the scored outputs per build x rubric (`review.sample_rate`,
`review.sample_seed`), and the largest disagreements of each bridge run (`review.bridge_top_n`, over
the run's builds). One item per attempt and rubric: judge versions sharing a rubric share the item
and its one human score (the agreement views pair it with each of them); the highest-priority
reason wins and re-filling adds only what is new. Items queued before (keyed by attempt and judge
version) stay readable, claimable and scorable, and an attempt one of them covers is not queued
again. `present` is what a reviewer is shown (scenario input, subject output, the rubric's criteria
and scales, never its weights, never the judge's verdict). `submit` validates the scores with the
same checks a model judge's verdict gets and stores them through `human_scores.record_score` (source
human), then marks the item done.
Every change is exported to the warehouse's `review_items` dataset (the `review_queue` view), so the
warehouse stays readable without the journal.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from eval_assets.bridge import calibration_row, rubric_points
from eval_assets.config import Problem
from eval_assets.human_scores import HumanScoreError, record_score, score_id
from eval_assets.judging import check_criteria, criteria_problems, scale_spec, strict_json

from ._store import NewItem, Reason, ReviewError, ReviewItem, ReviewStore, rows_of

if TYPE_CHECKING:
    from eval_assets.capability.track import Track

DATASET = "review_items"
SAMPLE_LABEL = "review-sample"


def item_id(build: str, rubric: str, scenario_id: str, repeat: int) -> str:
    """One item per attempt and rubric (16 hex digits of sha256 over the tagged key)."""
    key = json.dumps(["rubric", build, rubric, scenario_id, repeat], separators=(",", ":"))
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def judge_version_item_id(build: str, judge_version: str, scenario_id: str, repeat: int) -> str:
    """The id items had when they were keyed by attempt and judge version (journals written before
    items were keyed by rubric still hold such items; they keep their id)."""
    key = json.dumps([build, judge_version, scenario_id, repeat], separators=(",", ":"))
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _rubric_key(track: Track, judge_version: str) -> str:
    return track.project.rubric_for(track.judge(judge_version)).key


def keyed_by_rubric(track: Track, item: ReviewItem) -> bool:
    """Whether `item` is keyed by its rubric (else it was queued per judge version, before)."""
    return item.item_id == item_id(
        item.build, _rubric_key(track, item.judge_version), item.scenario_id, item.repeat
    )


def _new(
    track: Track, reason: Reason, build: str, jv: str, sid: str, repeat: int, detail: str | None
) -> NewItem:
    """The item of the attempt under `jv`'s rubric; `jv` is the judge version that routed it."""
    return NewItem(
        item_id(build, _rubric_key(track, jv), sid, repeat), reason, build, jv, sid, repeat, detail
    )


def sample_rank(seed: int, build: str, rubric: str, scenario_id: str, repeat: int) -> int:
    """The attempt's place in the seeded sample order: a hash of the seed and the attempt under its
    rubric, so an attempt's rank never depends on which other verdicts exist."""
    key = json.dumps([SAMPLE_LABEL, seed, build, rubric, scenario_id, repeat], separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def sample(verdicts: pd.DataFrame, rate: float, seed: int) -> pd.DataFrame:
    """Per (build, rubric): the ceil(rate x n) of its n scored attempts of lowest `sample_rank` (none
    when rate is 0), one row per attempt (that of the first judge version in id order that scored it).
    Same seed and verdicts, same sample, in any row order."""
    if rate <= 0 or verdicts.empty:
        return verdicts.iloc[0:0]
    attempts = verdicts.sort_values(
        ["build", "rubric", "scenario_id", "repeat", "judge_version"], kind="stable"
    ).drop_duplicates(["build", "rubric", "scenario_id", "repeat"])
    ranked = attempts.assign(
        _rank=[
            sample_rank(seed, str(r.build), str(r.rubric), str(r.scenario_id), int(r.repeat))
            for r in attempts.itertuples()
        ]
    ).sort_values(["build", "rubric", "_rank"], kind="stable")
    picked = [
        group.head(math.ceil(rate * len(group)))
        for _, group in ranked.groupby(["build", "rubric"], sort=True)
    ]
    return pd.concat(picked).drop(columns="_rank")


def bridge_disagreements(track: Track, judge_to: str, top_n: int) -> list[NewItem]:
    """The `top_n` outputs of the current bridge run into `judge_to` where the two versions disagree
    most: |new points - (old points + offset)| (offset 0 while unpublished), largest first, ties by
    attempt. Scored under `judge_to` (the version being adopted)."""
    row = calibration_row(track.warehouse, judge_to)
    if row is None or top_n <= 0:
        return []
    builds = [b for b in str(row["builds"] or "").split(",") if b]
    if not builds:
        return []
    old, new = track.judge(str(row["judge_from"])), track.judge(judge_to)
    r_old, r_new = track.project.rubric_for(old), track.project.rubric_for(new)
    marks = ", ".join("?" for _ in builds)
    frame = track.warehouse.query(
        "SELECT o.build, o.scenario_id, o.repeat, o.criteria AS c_old, n.criteria AS c_new "
        "FROM judge_verdicts o JOIN judge_verdicts n USING (build, scenario_id, repeat) "
        f"WHERE o.judge_version = ? AND n.judge_version = ? AND o.build IN ({marks}) "
        "AND o.status = 'scored' AND n.status = 'scored'",
        [old.version_id, new.version_id, *builds],
    )
    offset = float(row["offset_points"]) if row.get("offset_points") is not None else 0.0
    gaps = []
    for r in frame.itertuples():
        gap = rubric_points(json.loads(r.c_new), r_new) - rubric_points(json.loads(r.c_old), r_old) - offset
        gaps.append((-abs(gap), str(r.build), str(r.scenario_id), int(r.repeat), gap))
    gaps.sort()
    return [
        _new(
            track,
            "bridge_disagreement",
            b,
            judge_to,
            s,
            rep,
            f"{old.version_id} -> {judge_to}: {gap:+.3f} points after offset",
        )
        for _, b, s, rep, gap in gaps[:top_n]
    ]


def candidates(track: Track, build: str) -> list[NewItem]:
    """Everything `fill` would enqueue for `build`, highest priority first."""
    settings = track.project.settings.review
    verdicts = track.warehouse.query(
        "SELECT v.build, v.judge_version, v.rubric, v.scenario_id, v.repeat, v.status, v.failure_reason "
        "FROM judge_verdicts v JOIN scenario_runs r USING (build, scenario_id, repeat) "
        "WHERE v.build = ? AND v.source = 'model' AND r.output IS NOT NULL "
        "ORDER BY v.judge_version, v.scenario_id, v.repeat",
        [build],
    )
    out = [
        _new(
            track,
            "parse_failed",
            build,
            str(r.judge_version),
            str(r.scenario_id),
            int(r.repeat),
            str(r.failure_reason),
        )
        for r in verdicts.itertuples()
        if r.status == "failed"
    ]
    for jv in sorted(track.project.judges):
        out += [i for i in bridge_disagreements(track, jv, settings.bridge_top_n) if i.build == build]
    picked = sample(verdicts[verdicts["status"] == "scored"], settings.sample_rate, settings.sample_seed)
    out += [
        _new(
            track,
            "sample",
            build,
            str(r.judge_version),
            str(r.scenario_id),
            int(r.repeat),
            f"seed {settings.sample_seed}",
        )
        for r in picked.itertuples()
    ]
    first: dict[str, NewItem] = {}
    for item in out:  # highest priority first: an attempt routed twice under one rubric keeps the first
        first.setdefault(item.item_id, item)
    return list(first.values())


# --- the queue as a domain object --------------------------------------------------------------


@dataclass(frozen=True)
class FillSummary:
    builds: list[str]
    proposed: int
    added: int
    by_reason: dict[str, int]


def open_store(track: Track, clock: Any = None) -> ReviewStore:
    """The queue in the track's journal database, with the project's claim TTL."""
    ttl = track.project.settings.review.claim_ttl_s
    return (
        ReviewStore(track.journal_url, claim_ttl_s=ttl)
        if clock is None
        else ReviewStore(track.journal_url, claim_ttl_s=ttl, clock=clock)
    )


def export(track: Track, store: ReviewStore, build: str) -> Path:
    """Write the build's items, as the journal holds them now, to the `review_items` dataset."""
    rows = rows_of(store.items(build=build))
    return track.warehouse.write_partition(DATASET, {"build": build}, rows, f"review-{uuid.uuid4().hex[:12]}")


def _covered(track: Track, store: ReviewStore, build: str) -> tuple[set[str], set[tuple[str, str, int]]]:
    """The ids of `build`'s queued items and the (rubric, scenario, repeat) they cover (an item of a
    judge version the project no longer defines covers nothing)."""
    ids, keys = set(), set()
    for item in store.items(build=build):
        ids.add(item.item_id)
        judge = track.project.judges.get(item.judge_version)
        if judge is not None:
            keys.add((track.project.rubric_for(judge).key, item.scenario_id, item.repeat))
    return ids, keys


def fill(track: Track, store: ReviewStore, builds: Sequence[str]) -> FillSummary:
    """Queue every build's candidates whose attempt no item covers yet under the same rubric (an item
    keyed by judge version, queued before, covers its attempt under that version's rubric)."""
    proposed: list[NewItem] = []
    for build in builds:
        ids, covered = _covered(track, store, build)
        proposed += [
            i
            for i in candidates(track, build)
            if i.item_id in ids
            or (_rubric_key(track, i.judge_version), i.scenario_id, i.repeat) not in covered
        ]
    added = store.enqueue(proposed)
    for build in builds:
        export(track, store, build)
    by_reason: dict[str, int] = {}
    for item in proposed:
        by_reason[item.reason] = by_reason.get(item.reason, 0) + 1
    return FillSummary(list(builds), len(proposed), added, by_reason)


def present(track: Track, item: ReviewItem) -> dict[str, Any]:
    """What the reviewer sees: the scenario input, the subject output and the rubric's criteria with
    their scales (no weights, no judge verdict)."""
    judge = track.judge(item.judge_version)
    rubric = track.project.rubric_for(judge)
    scenario = track.project.scenarios.get(item.scenario_id)
    runs = track.warehouse.query(
        "SELECT output FROM scenario_runs WHERE build = ? AND scenario_id = ? AND repeat = ?",
        [item.build, item.scenario_id, item.repeat],
    )
    output = runs["output"].iloc[0] if len(runs) else None
    return {
        "item_id": item.item_id,
        "reason": item.reason,
        "build": item.build,
        "judge_version": item.judge_version,
        "rubric": rubric.key,
        "scenario_id": item.scenario_id,
        "repeat": item.repeat,
        "input": [] if scenario is None else [{"role": m.role, "content": m.content} for m in scenario.input],
        "output": output if isinstance(output, str) else None,
        "criteria": scale_spec(rubric),
        "expires_at": item.expires_at,
    }


def parse_scores(parts: Sequence[str]) -> dict[str, Any]:
    """`--scores` as given: one JSON object, or NAME=VALUE pairs (VALUE read as JSON when it is a
    number, true/false or null, else as text: `accuracy=4 tone=polite`). Raises ReviewError."""
    text = " ".join(parts).strip()
    if text.startswith("{"):
        try:
            data = strict_json(text)
        except (ValueError, RecursionError) as exc:
            raise ReviewError(f"--scores: not a valid JSON object: {exc}") from None
        if not isinstance(data, dict):
            raise ReviewError("--scores: expected a JSON object")
        return data
    out: dict[str, Any] = {}
    for part in parts:
        name, eq, raw = part.partition("=")
        if not eq or not name.strip():
            raise ReviewError(f"--scores: {part!r} is not NAME=VALUE")
        if name.strip() in out:
            raise ReviewError(f"--scores: {name.strip()} given twice")
        try:
            value = strict_json(raw)
        except (ValueError, RecursionError):
            value = raw
        out[name.strip()] = value if value is None or isinstance(value, bool | int | float) else raw
    if not out:
        raise ReviewError("--scores: no criterion given")
    return out


@dataclass(frozen=True)
class SubmitResult:
    item: ReviewItem
    score_id: str
    appended: int
    already: bool


def submit(
    track: Track, store: ReviewStore, item_id: str, reviewer: str, scores: dict[str, Any]
) -> SubmitResult:
    """Validate `scores` against the item's rubric (the verdict parser's checks: every criterion, no
    other, each in its scale) and store them as the reviewer's human score; then mark the item done.

    Fails closed (ReviewError / HumanScoreError, nothing written) when the reviewer holds no live
    claim, or any value is wrong. Submitting the same values again for a done item of the same
    reviewer is a no-op that says so (idempotent); different values for a done item are refused.
    """
    item = store.get(item_id)
    if item is None:
        raise ReviewError(f"no review item {item_id!r}")
    judge = track.judge(item.judge_version)
    rubric = track.project.rubric_for(judge)
    # an item keyed by rubric is scored under the rubric (the score serves every version using it);
    # one queued per judge version, before, keeps storing that version, so its score id is unchanged
    scored_under = None if keyed_by_rubric(track, item) else judge.version_id
    problems = criteria_problems(scores, rubric)
    verdict = check_criteria(scores, rubric)
    if problems or verdict.status != "scored":
        raise HumanScoreError(
            Problem(f"review:{item_id}", "criteria", p) for p in problems or [str(verdict.failure_reason)]
        )
    if item.state == "done":
        same = score_id(
            {
                "build": item.build,
                "scenario_id": item.scenario_id,
                "repeat": item.repeat,
                "rubric": rubric.key,
                "judge_version": scored_under,
                "criteria": verdict.criteria,
                "author": reviewer,
                "retracts": None,
            }
        )
        if item.done_by == reviewer and item.score_id == same:
            return SubmitResult(item, same, 0, True)
        raise ReviewError(f"item {item_id} is done (score {item.score_id} by {item.done_by}): nothing stored")
    store.live_claim(item_id, reviewer)
    stored = record_score(
        track,
        build=item.build,
        scenario_id=item.scenario_id,
        repeat=item.repeat,
        judge_version=scored_under,
        rubric=rubric.key,
        author=reviewer,
        criteria=scores,
        origin=f"review:{item_id}",
        run_id=f"review-{uuid.uuid4().hex[:12]}",
    )
    done = store.complete(item_id, reviewer, stored["score_id"])
    export(track, store, item.build)
    return SubmitResult(done, stored["score_id"], int(stored["appended"]), False)


class UncertainEffects:
    """The review queue at a journal URL, as an agent case uses it (`run_suite(hooks={"review_queue":
    UncertainEffects})`): an invocation an agent reported `uncertain` becomes an `uncertain_effect`
    item, first in the queue, for a person to check whether the effect happened."""

    def __init__(self, url: str, claim_ttl_s: float = 3600.0) -> None:
        self._store = ReviewStore(url, claim_ttl_s=claim_ttl_s)

    def enqueue(self, build: str, scenario_id: str, repeat: int, record: dict[str, Any]) -> int:
        key = json.dumps(
            ["uncertain_effect", build, scenario_id, repeat, record["id"]], separators=(",", ":")
        )
        detail = f"{record['tool']} {record['id']}: outcome unknown ({record.get('detail') or 'no detail'})"
        item = NewItem(
            hashlib.sha256(key.encode()).hexdigest()[:16],
            "uncertain_effect",
            build,
            "-",
            scenario_id,
            repeat,
            detail,
        )
        return self._store.enqueue([item])

    def count(self, build: str) -> int:
        return sum(1 for i in self._store.items(build=build) if i.reason == "uncertain_effect")

    def close(self) -> None:
        self._store.close()

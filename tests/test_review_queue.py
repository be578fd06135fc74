"""The human review queue: exclusive claims in the journal database (SQLite and PostgreSQL, raced by
two real processes), expiry on an injected clock, what is routed to people, and submissions stored
as human scores that `judge_agreement` counts.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from multiprocessing.synchronize import Barrier as ProcessBarrier
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from shared import BASELINE, baseline_home, track_on_copy

from eval_assets.capability.track import Track
from eval_assets.config import Project
from eval_assets.human_scores import HumanScoreError
from eval_assets.review import (
    NewItem,
    ReviewError,
    ReviewStore,
    candidates,
    fill,
    item_id,
    judge_version_item_id,
    keyed_by_rubric,
    open_store,
    parse_scores,
    present,
    sample,
    submit,
)
from eval_assets.spend import journal_url

try:  # tests/ imported as a package or as a rootdir on sys.path
    from tests.pg import PostgresCluster, running_cluster
except ImportError:  # pragma: no cover
    from pg import PostgresCluster, running_cluster  # type: ignore[no-redef]

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
BUILD = BASELINE
ROOT = Path(__file__).resolve().parents[1]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(scope="module")
def pg_cluster() -> Iterator[PostgresCluster]:
    with running_cluster("review queue") as cluster:
        yield cluster


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return journal_url(tmp_path / "home")
    cluster: PostgresCluster = request.getfixturevalue("pg_cluster")
    return cluster.create_database()


def items(n: int, build: str = "b1") -> list[NewItem]:
    return [
        NewItem(item_id(build, "j-v1", f"s{i}", 1), "sample", build, "j-v1", f"s{i}", 1) for i in range(n)
    ]


# --- claims -----------------------------------------------------------------------------------------


def test_enqueue_is_idempotent_and_next_claims_by_priority(url: str) -> None:
    clock = Clock()
    with ReviewStore(url, claim_ttl_s=600, clock=clock) as store:
        failed = NewItem(
            item_id("b1", "j-v1", "bad", 1), "parse_failed", "b1", "j-v1", "bad", 1, "no <verdict>"
        )
        assert store.enqueue(items(3)) == 3
        assert store.enqueue([*items(3), failed]) == 1  # only the new one
        first = store.claim_next("ana")
        assert first.status == "claimed" and first.item is not None
        assert first.item.item_id == failed.item_id  # a failed verdict before the sample
        again = store.claim_next("ana")
        assert again.status == "held" and again.item is not None and again.item.item_id == failed.item_id
        other = store.claim_next("ben")
        assert other.status == "claimed" and other.item is not None and other.item.reason == "sample"
        assert store.claim(failed.item_id, "ben").status == "taken"
        assert "claimed by ana" in store.claim(failed.item_id, "ben").message


def _race(url: str, ids: list[str], reviewer: str, start: ProcessBarrier, out: str) -> None:
    store = ReviewStore(url, claim_ttl_s=3600)
    results = []
    for item in ids:
        start.wait()  # both processes issue their claim on the same item at the same moment
        outcome = store.claim(item, reviewer)
        results.append([item, outcome.status, outcome.message])
    nxt = []
    start.wait()
    outcome = store.claim_next(reviewer, build="race-next")
    nxt.append([outcome.status, None if outcome.item is None else outcome.item.item_id, outcome.message])
    Path(out).write_text(json.dumps({"claims": results, "next": nxt}))
    store.close()


def test_two_processes_racing_for_each_item_one_wins_the_other_is_told_it_is_taken(
    url: str, tmp_path: Path
) -> None:
    rounds = 25
    with ReviewStore(url, claim_ttl_s=3600) as store:
        store.enqueue(items(rounds))
        store.enqueue(items(1, build="race-next"))
        ids = [i.item_id for i in items(rounds)]
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(2)
    outs = [tmp_path / f"{name}.json" for name in ("ana", "ben")]
    procs = [
        spawn.Process(target=_race, args=(url, ids, name, start, str(out)))
        for name, out in zip(("ana", "ben"), outs, strict=True)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(600)
        assert p.exitcode == 0
    ana, ben = (json.loads(o.read_text()) for o in outs)
    with ReviewStore(url, claim_ttl_s=3600) as store:
        holders = {i.item_id: i.claimed_by for i in store.items(build="b1")}
        for (item, a_status, a_msg), (_, b_status, b_msg) in zip(ana["claims"], ben["claims"], strict=True):
            assert sorted([a_status, b_status]) == ["claimed", "taken"], (a_msg, b_msg)
            winner = "ana" if a_status == "claimed" else "ben"
            loser_msg = b_msg if winner == "ana" else a_msg
            assert holders[item] == winner
            assert f"is taken: claimed by {winner}" in loser_msg
        (a_next,), (b_next,) = ana["next"], ben["next"]
        assert sorted([a_next[0], b_next[0]]) in (["claimed", "taken"], ["claimed", "empty"])
        [only] = store.items(build="race-next")
        assert only.claimed_by == ("ana" if a_next[0] == "claimed" else "ben")


def test_a_claim_lapses_after_its_ttl_and_only_its_holder_can_release_or_complete_it(url: str) -> None:
    clock = Clock()
    with ReviewStore(url, claim_ttl_s=600, clock=clock) as store:
        store.enqueue(items(1))
        [item] = store.items()
        assert store.claim(item.item_id, "ana").status == "claimed"
        clock.now = T0 + timedelta(seconds=599)
        assert store.claim(item.item_id, "ben").status == "taken"
        with pytest.raises(ReviewError, match="claimed by ana"):
            store.release(item.item_id, "ben")
        clock.now = T0 + timedelta(seconds=600)  # the TTL has passed: open again
        assert store.items()[0].state_at(store.now()) == "open"
        with pytest.raises(ReviewError, match="lapsed"):
            store.live_claim(item.item_id, "ana")
        with pytest.raises(ReviewError):
            store.complete(item.item_id, "ana", "score-x")
        assert store.claim(item.item_id, "ben").status == "claimed"
        assert store.release(item.item_id, "ben").state == "open"
        assert store.claim_next("cy").status == "claimed"
        store.complete(item.item_id, "cy", "score-y")
        assert store.claim(item.item_id, "dee").status == "done"
        assert store.claim_next("dee").status == "empty"


# --- routing and submission on a real build ---------------------------------------------------------


@pytest.fixture(scope="module")
def template(project: Project, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return baseline_home(project, tmp_path_factory.mktemp("review-template") / "eval_home", judged=True)


@pytest.fixture
def track(project: Project, template: Path, tmp_path: Path) -> Track:
    return track_on_copy(project, template, tmp_path)


def test_the_sample_is_seeded_per_build_and_rubric_and_ignores_row_order(track: Track) -> None:
    verdicts = track.warehouse.query(
        "SELECT build, judge_version, rubric, scenario_id, repeat FROM judge_verdicts WHERE status = 'scored'"
    )
    counts = verdicts.drop_duplicates(["rubric", "scenario_id", "repeat"]).groupby("rubric").size()
    picked = sample(verdicts, 0.05, 129)
    assert picked.groupby("rubric").size().to_dict() == {
        rubric: -(-n * 5 // 100) for rubric, n in counts.items()
    }  # ceil(rate x n) per rubric
    shuffled = sample(verdicts.sample(frac=1.0, random_state=7), 0.05, 129)
    key = ["rubric", "scenario_id", "repeat"]
    assert shuffled[key].sort_values(key).values.tolist() == picked[key].sort_values(key).values.tolist()
    other = sample(verdicts, 0.05, 130)
    assert other[key].sort_values(key).values.tolist() != picked[key].sort_values(key).values.tolist()
    assert sample(verdicts, 0.0, 129).empty
    # a second judge version of the same rubric adds no attempt to the sample: it is drawn per rubric
    twice = pd.concat([verdicts, verdicts.assign(judge_version=verdicts["judge_version"] + "-copy")])
    again = sample(twice, 0.05, 129)
    assert again[key].sort_values(key).values.tolist() == picked[key].sort_values(key).values.tolist()


def test_fill_routes_failed_verdicts_first_and_the_sample_and_refilling_adds_nothing(track: Track) -> None:
    failed = track.warehouse.query(
        "SELECT count(*) AS n FROM judge_verdicts v JOIN scenario_runs r USING (build, scenario_id, repeat) "
        "WHERE v.status = 'failed' AND r.output IS NOT NULL"
    )["n"].iloc[0]
    proposed = candidates(track, BUILD)
    assert sum(1 for i in proposed if i.reason == "parse_failed") == failed
    with open_store(track) as store:
        summary = fill(track, store, [BUILD])
        assert summary.added == len({i.item_id for i in proposed}) > 0
        assert fill(track, store, [BUILD]).added == 0
        first = store.claim_next("ana")
        assert first.item is not None
        assert first.item.reason == ("parse_failed" if failed else "sample")
    view = track.warehouse.query(
        "SELECT state, count(*) AS n FROM review_queue GROUP BY state ORDER BY state"
    )
    assert view.set_index("state")["n"].to_dict() == {"open": summary.added}  # exported before the claim


def test_a_reviewer_sees_input_output_and_scales_but_never_weights(track: Track) -> None:
    with open_store(track) as store:
        fill(track, store, [BUILD])
        outcome = store.claim_next("ana")
    assert outcome.item is not None
    shown = present(track, outcome.item)
    text = json.dumps(shown)
    assert shown["input"] and shown["output"]
    assert all({"name", "description", "scale"} == set(c) for c in shown["criteria"])
    assert "weight" not in text
    rubric = track.project.rubric_for(track.judge(outcome.item.judge_version))
    assert [c["name"] for c in shown["criteria"]] == [c.name for c in rubric.criteria]


def _scores(track: Track, judge_version: str, *, best: bool) -> dict[str, Any]:
    """Every criterion at the top (best) or the bottom of its scale."""
    from eval_assets.config import BoolScale, FloatScale, IntScale

    out: dict[str, Any] = {}
    for c in track.project.rubric_for(track.judge(judge_version)).criteria:
        s = c.scale
        if isinstance(s, IntScale | FloatScale):
            out[c.name] = s.max if best else s.min
        elif isinstance(s, BoolScale):
            out[c.name] = best
        else:
            out[c.name] = list(s.labels)[-1 if best else 0]
    return out


def test_submit_validates_like_a_judge_verdict_stores_a_human_score_and_is_idempotent(track: Track) -> None:
    clock = Clock()
    with open_store(track, clock=clock) as store:
        fill(track, store, [BUILD])
        claimed = store.claim_next("ana")
        assert claimed.item is not None
        item = claimed.item
        good = _scores(track, item.judge_version, best=True)
        with pytest.raises(ReviewError, match="claim it first"):
            submit(track, store, item.item_id, "ben", good)  # not ben's claim
        name = next(iter(good))
        for bad in ({**good, name: 99}, {k: v for k, v in good.items() if k != name}, {**good, "extra": 1}):
            with pytest.raises(HumanScoreError):
                submit(track, store, item.item_id, "ana", bad)
        assert track.warehouse.query("SELECT count(*) AS n FROM human_scores")["n"].iloc[0] == 0
        result = submit(track, store, item.item_id, "ana", good)
        assert not result.already and result.appended == 1
        again = submit(track, store, item.item_id, "ana", good)
        assert again.already and again.score_id == result.score_id
        with pytest.raises(ReviewError, match="is done"):
            submit(track, store, item.item_id, "ana", _scores(track, item.judge_version, best=False))
    human = track.warehouse.query("SELECT * FROM human_scores")
    assert len(human) == 1
    row = human.iloc[0]
    assert (row["source"], row["author"], row["imported_from"]) == ("human", "ana", f"review:{item.item_id}")
    assert row["score"] == pytest.approx(1.0)
    queue = track.warehouse.query(
        "SELECT state, done_by, score_id FROM review_queue WHERE item_id = ?", [item.item_id]
    )
    assert queue.iloc[0].tolist() == ["done", "ana", result.score_id]


def test_judge_agreement_counts_queue_scores(track: Track) -> None:
    with open_store(track) as store:
        fill(track, store, [BUILD])
        scored_by: dict[str, int] = {}
        for item in store.items(build=BUILD):
            if item.reason != "sample":
                continue
            assert store.claim(item.item_id, "ana").status == "claimed"
            verdict = track.warehouse.query(
                "SELECT criteria FROM judge_verdicts WHERE build = ? AND judge_version = ? "
                "AND scenario_id = ? AND repeat = ?",
                [item.build, item.judge_version, item.scenario_id, item.repeat],
            ).iloc[0]
            submit(track, store, item.item_id, "ana", json.loads(verdict["criteria"]))  # agree with the judge
            scored_by[item.judge_version] = scored_by.get(item.judge_version, 0) + 1
    agreement = track.warehouse.query("SELECT judge_version, n, n_review FROM judge_agreement")
    assert scored_by
    assert dict(zip(agreement["judge_version"], agreement["n_review"], strict=True)) == scored_by
    assert (agreement["n"] == agreement["n_review"]).all()


def test_parse_scores_reads_pairs_and_json_and_refuses_junk() -> None:
    assert parse_scores(["correctness=4", "tone=polite", "safe=true"]) == {
        "correctness": 4,
        "tone": "polite",
        "safe": True,
    }
    assert parse_scores(['{"correctness": 4}']) == {"correctness": 4}
    for bad in (["correctness"], ["a=1", "a=2"], ['{"a": 1, "a": 2}'], ["[1]"]):
        with pytest.raises(ReviewError):
            parse_scores(bad)


def test_cli_next_submit_release_round_trip(track: Track) -> None:
    env = {**os.environ, "EVAL_HOME": str(track.home.root), "LITELLM_OFFLINE_MODE": "true"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "eval_assets.cli", "--home", str(track.home.root), *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=300,
        )

    assert cli("review", "fill", "--build", BUILD).returncode == 0
    shown = cli("review", "next", "--reviewer", "ana", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert "weight" not in shown.stdout
    taken = cli("review", "next", "--reviewer", "ben", "--item", doc["item_id"])
    assert taken.returncode == 1 and "taken: claimed by ana" in taken.stderr
    bad = cli("review", "submit", doc["item_id"], "--reviewer", "ana", "--scores", "nonsense=1")
    assert bad.returncode == 1 and "unknown criterion: nonsense" in bad.stderr
    assert cli("review", "release", doc["item_id"], "--reviewer", "ben").returncode == 1
    assert cli("review", "release", doc["item_id"], "--reviewer", "ana").returncode == 0
    assert cli("review", "next", "--reviewer", "ben", "--item", doc["item_id"]).returncode == 0
    scores = [f"{c['name']}={_value(c['scale'])}" for c in doc["criteria"]]
    done = cli("review", "submit", doc["item_id"], "--reviewer", "ben", "--scores", *scores)
    assert done.returncode == 0, done.stderr
    assert "stored in human_scores" in done.stdout


def _value(scale: dict[str, Any]) -> str:
    if scale["type"] in ("int", "float"):
        return str(scale["min"])
    if scale["type"] == "bool":
        return "false"
    return str(scale["labels"][0])


@pytest.mark.parametrize(
    "review, field",
    [
        ({"sample_rate": 1.5}, "sample_rate"),
        ({"sample_rate": True}, "sample_rate"),
        ({"claim_ttl_s": 0}, "claim_ttl_s"),
        ({"sample_seed": -1}, "sample_seed"),
        ({"bridge_top": 3}, "bridge_top"),
    ],
)
def test_review_settings_are_validated_like_every_setting(review: dict[str, Any], field: str) -> None:
    from pydantic import ValidationError

    from eval_assets.config import Settings

    with pytest.raises(ValidationError, match=field):
        Settings.model_validate({"review": review})
    assert Settings.model_validate({"review": {"sample_rate": 0.1}}).review.sample_rate == 0.1


@pytest.mark.parametrize(
    "reviewer",
    ["ana\x00", "ben\x1b[2J", "sk-" + "proj-" + "a1b2c3d4" * 3, "gh" + "o_" + "A1b2C3d4E5" * 4],
    ids=["nul", "escape", "sk-key", "github-oauth"],
)
def test_a_reviewer_name_with_a_control_character_or_a_credential_is_refused_and_never_stored(
    url: str, reviewer: str
) -> None:
    with ReviewStore(url, claim_ttl_s=600, clock=Clock()) as store:
        store.enqueue(items(1))
        [item] = store.items()
        with pytest.raises(ReviewError, match="reviewer: ") as raised:
            store.claim(item.item_id, reviewer)
        assert reviewer not in str(raised.value)
        with pytest.raises(ReviewError):
            store.claim_next(reviewer)
        assert [i.claimed_by for i in store.items()] == [None]


# --- one item per output x rubric ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_rubric_project(project: Project) -> Project:
    """The shipped project plus helpfulness-v2: helpfulness-v1 with another seed, on the same rubric."""
    v1 = project.judges["helpfulness-v1"]
    v2 = v1.model_copy(update={"version": 2, "params": {**v1.params, "seed": 12}})
    return dataclasses.replace(project, judges={**project.judges, "helpfulness-v2": v2})


@pytest.fixture(scope="module")
def shared_rubric_template(shared_rubric_project: Project, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("review-shared-rubric") / "eval_home"
    return baseline_home(shared_rubric_project, root, judged=True)


def test_two_judge_versions_of_one_rubric_share_one_item_one_score_and_both_get_agreement(
    shared_rubric_project: Project, shared_rubric_template: Path, tmp_path: Path
) -> None:
    track = track_on_copy(shared_rubric_project, shared_rubric_template, tmp_path)
    rubric = track.project.rubric_for(track.judge("helpfulness-v2")).key
    assert rubric == track.project.rubric_for(track.judge("helpfulness-v1")).key
    with open_store(track) as store:
        fill(track, store, [BUILD])
        queued = store.items(build=BUILD)
        keys = [
            (track.project.rubric_for(track.judge(i.judge_version)).key, i.scenario_id, i.repeat)
            for i in queued
        ]
        assert len(keys) == len(set(keys))  # one item per attempt and rubric
        both = track.warehouse.query(
            "SELECT scenario_id, repeat FROM judge_verdicts WHERE build = ? AND status = 'scored' "
            "AND judge_version IN ('helpfulness-v1', 'helpfulness-v2') "
            "GROUP BY scenario_id, repeat HAVING count(DISTINCT judge_version) = 2",
            [BUILD],
        )
        scored_by_both = set(zip(both["scenario_id"], both["repeat"].astype(int), strict=True))
        item = next(i for i in queued if i.reason == "sample" and (i.scenario_id, i.repeat) in scored_by_both)
        assert [
            i.item_id for i in queued if (i.scenario_id, i.repeat) == (item.scenario_id, item.repeat)
        ] == [item.item_id]
        assert item.item_id == item_id(BUILD, rubric, item.scenario_id, item.repeat)
        assert store.claim(item.item_id, "ana").status == "claimed"
        result = submit(track, store, item.item_id, "ana", _scores(track, item.judge_version, best=True))
        assert fill(track, store, [BUILD]).added == 0
    human = track.warehouse.query("SELECT * FROM human_scores")
    assert len(human) == 1 and human["score_id"].iloc[0] == result.score_id
    assert (human["rubric"].iloc[0], human["judge_version"].iloc[0]) == (rubric, None)
    agreement = track.warehouse.query(
        "SELECT judge_version, n, n_review FROM judge_agreement WHERE rubric = ? ORDER BY judge_version",
        [rubric],
    )
    assert agreement.values.tolist() == [["helpfulness-v1", 1, 1], ["helpfulness-v2", 1, 1]]
    per_criterion = track.warehouse.query(
        "SELECT DISTINCT judge_version FROM judge_agreement_criteria WHERE rubric = ? ORDER BY 1", [rubric]
    )
    assert list(per_criterion["judge_version"]) == ["helpfulness-v1", "helpfulness-v2"]


def test_an_item_queued_per_judge_version_before_is_claimed_scored_and_not_queued_again(track: Track) -> None:
    """A journal written when items were keyed by attempt x judge version: the old item keeps its id,
    is claimed and scored as before (its score names the judge version, so its id is unchanged), and
    filling does not queue its attempt a second time under the rubric."""
    sampled = [i for i in candidates(track, BUILD) if i.reason == "sample"]
    first = sampled[0]
    old_id = judge_version_item_id(BUILD, first.judge_version, first.scenario_id, first.repeat)
    assert old_id != first.item_id
    with open_store(track) as store:
        store.enqueue(
            [
                NewItem(
                    old_id, "sample", BUILD, first.judge_version, first.scenario_id, first.repeat, "seed 129"
                )
            ]
        )
        summary = fill(track, store, [BUILD])
        ids = {i.item_id for i in store.items(build=BUILD)}
        assert old_id in ids and first.item_id not in ids
        assert summary.added == len(ids) - 1
        old = store.get(old_id)
        assert old is not None and not keyed_by_rubric(track, old)
        assert store.claim(old_id, "ana").status == "claimed"
        good = _scores(track, first.judge_version, best=True)
        result = submit(track, store, old_id, "ana", good)
        assert submit(track, store, old_id, "ana", good).already
    row = track.warehouse.query("SELECT * FROM human_scores").iloc[0]
    assert (row["score_id"], row["judge_version"], row["imported_from"]) == (
        result.score_id,
        first.judge_version,
        f"review:{old_id}",
    )
    done = track.warehouse.query("SELECT state, score_id FROM review_queue WHERE item_id = ?", [old_id])
    assert done.iloc[0].tolist() == ["done", result.score_id]

"""The replay loop: tool calls answered from the recording through the real litellm path (sim subject)."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval_assets.capability.materialize import materialize_scenario_runs
from eval_assets.capability.track import Track
from eval_assets.config import BuildManifest, EngineSettings, Project, Scenario
from eval_assets.engine import MISS_PREFIX, CallResult, Engine, Replay, ReplayRun, replay_loop, subject_spec
from eval_assets.home import EvalHome
from eval_assets.providers.gateway import CallSpec, ModelGateway
from eval_assets.spend import TURN_STRIDE, AttemptRef, SpendPath, open_journal

FAST = EngineSettings(
    concurrency_per_model=8, timeout_s=5, max_tries=3, backoff_base_s=0.001, backoff_max_s=0.005
)
POLLING = "converted.support-a9fa3981fb8f"  # three recorded calls, one key recorded twice
REFUND = "converted.support-728838cd92b1"  # three recorded calls on three tools
NO_CALLS = "converted.support-049d65fc421f"  # tools offered, none called in the recording


def build(skill: float, **params: Any) -> BuildManifest:
    return BuildManifest.model_validate(
        {
            "id": "b-replay",
            "milestone": 3,
            "subject": {
                "model": "sim/agent",
                "family": "sim",
                "params": {"skill": skill, "noise": 0.0, "seed": 3, **params},
            },
        }
    )


def engine(project: Project, path: Path) -> Engine:
    prices = {
        m: (p.input_per_mtok / 1e6, p.output_per_mtok / 1e6) for m, p in project.settings.prices.items()
    }
    spend = SpendPath(open_journal(f"sqlite:///{path}"), ModelGateway(prices), run_id="r1")
    return Engine(spend=spend, settings=FAST, jitter=random.Random(0))


def run_loop(eng: Engine, manifest: BuildManifest, scenario: Scenario, repeat: int = 1) -> ReplayRun:
    """One attempt through the engine's spend path, keeping the whole conversation."""
    ref = AttemptRef(manifest.id, scenario.id, repeat, "subject")
    spec = subject_spec(
        manifest.subject, scenario, build=manifest.id, repeat=repeat, timeout_s=eng.settings.timeout_s
    )
    return asyncio.run(replay_loop(scenario, spec, lambda turn, s: eng.call(replace(ref, turn=turn), s)))


def tool_messages(messages: tuple[dict[str, Any], ...]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool"]


def recorded_spec(scenario: Scenario) -> CallSpec:
    return CallSpec(
        model="sim/agent", messages=[m.model_dump() for m in scenario.input], max_tokens=64, timeout_s=5
    )


# --- through litellm and the spend path ------------------------------------------------------------


def test_a_skilled_subject_gets_every_recorded_result_and_no_tool_is_executed(
    project: Project, tmp_path: Path
) -> None:
    scenario = project.scenarios[REFUND]

    result = run_loop(engine(project, tmp_path / "j.sqlite"), build(1.0), scenario)

    assert (result.call.status, result.turns, result.replay_misses) == ("ok", 4, 0)
    assert tool_messages(result.messages) == [e.result for e in scenario.replay]
    assert result.call.text is not None and result.call.text.startswith(f"Answer to {scenario.id}")
    calls = [m["tool_calls"][0]["function"] for m in result.messages if m.get("tool_calls")]
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [
        (e.tool, json.loads(e.arguments)) for e in scenario.replay
    ]


def test_unrecorded_calls_get_an_error_result_and_count_as_replay_misses(
    project: Project, tmp_path: Path
) -> None:
    scenario = project.scenarios[REFUND]

    result = run_loop(engine(project, tmp_path / "j.sqlite"), build(0.0), scenario)

    assert (result.call.status, result.turns, result.replay_misses) == (
        "ok",
        scenario.max_turns,
        scenario.max_turns - 1,
    )
    answers = tool_messages(result.messages)
    assert len(answers) == scenario.max_turns - 1 and all(a.startswith(MISS_PREFIX) for a in answers)
    assert result.call.text is not None and result.call.text.startswith("Answer to")  # the last turn answers


def test_every_turn_is_one_journaled_call_with_a_deterministic_unique_key(
    project: Project, tmp_path: Path
) -> None:
    scenarios = [project.scenarios[REFUND], project.scenarios[POLLING], project.scenarios[NO_CALLS]]
    runs = []
    for name in ("a", "b"):
        eng = engine(project, tmp_path / f"{name}.sqlite")
        results = asyncio.run(eng.run_subjects(build(0.6), scenarios))
        keys = sorted(r.attempt_key for r in eng.spend.journal.rows())
        runs.append(
            ([(r.scenario.id, r.repeat, r.call.text, r.turns, r.replay_misses) for r in results], keys)
        )

    assert runs[0] == runs[1]
    rows, keys = runs[0]
    assert len(keys) == len(set(keys)) == sum(r[3] for r in rows)  # one key per turn, none shared
    assert {int(k.rsplit("/", 1)[1]) for k in keys} >= {1, TURN_STRIDE + 1, 2 * TURN_STRIDE + 1}
    assert sum(r[4] for r in rows) > 0 and any(r[4] == 0 for r in rows)
    assert {r[3] for r in rows if r[0] == NO_CALLS} == {1}  # nothing recorded: it answers at once


def test_a_scenario_without_tools_is_still_one_call_with_its_single_call_key(
    project: Project, tmp_path: Path
) -> None:
    authored = project.scenarios["support.refund-policy"]
    eng = engine(project, tmp_path / "j.sqlite")

    results = asyncio.run(eng.run_subjects(build(0.7), [authored]))

    assert {(r.turns, r.replay_misses) for r in results} == {(1, 0)}
    assert sorted(r.attempt_key for r in eng.spend.journal.rows()) == [
        f"b-replay/-/{authored.id}/{n}/subject/1" for n in range(1, authored.repeats + 1)
    ]


def test_a_turn_that_errors_ends_the_attempt_without_output(project: Project, tmp_path: Path) -> None:
    attempt = asyncio.run(
        engine(project, tmp_path / "j.sqlite").run_subject(
            build(1.0, error_rate=1.0), project.scenarios[REFUND], 1
        )
    )

    assert (attempt.call.status, attempt.call.text, attempt.turns) == ("error", None, 1)
    assert attempt.call.tries == FAST.max_tries and "injected provider error" in (attempt.call.error or "")


def test_scenario_runs_rows_and_metadata_carry_turns_and_replay_misses(
    project: Project, home: EvalHome, tmp_path: Path
) -> None:
    manifest = tmp_path / "b.yaml"
    manifest.write_text(build(0.5).model_dump_json(), encoding="utf-8")
    track = Track(project, home)
    track.register_build(manifest)

    summary = materialize_scenario_runs(track, "b-replay", "run-1")

    rows = track.warehouse.query(
        "SELECT source, sum(replay_misses) AS misses, min(turns) AS low, max(turns) AS high "
        "FROM scenario_runs WHERE build = 'b-replay' GROUP BY source ORDER BY source"
    ).to_dict("records")
    authored, converted = rows
    assert (authored["source"], authored["misses"], authored["high"]) == ("authored", 0, 1)
    assert (converted["source"], converted["misses"], converted["low"]) == (
        "trajectory",
        summary["replay_misses"],
        1,
    )
    assert summary["replay_misses"] > 0 and converted["high"] > 2


# --- the loop itself (scripted turns, no model) -----------------------------------------------------


def scripted(*replies: CallResult) -> tuple[list[CallSpec], Any]:
    specs: list[CallSpec] = []

    async def call_turn(turn: int, spec: CallSpec) -> CallResult:
        specs.append(spec)
        return replies[min(turn, len(replies)) - 1]

    return specs, call_turn


def tool_turn(name: str, arguments: str) -> CallResult:
    return CallResult("ok", "", 1, 0.001, tool_calls=[{"id": None, "name": name, "arguments": arguments}])


def test_a_last_turn_that_still_calls_tools_is_a_turn_limit_error(project: Project) -> None:
    scenario = project.scenarios[REFUND].model_copy(update={"max_turns": 3})
    specs, call_turn = scripted(tool_turn("lookup_order", '{"order_number": "NW-51877"}'))

    run = asyncio.run(replay_loop(scenario, recorded_spec(scenario), call_turn))

    assert (run.call.status, run.call.error_kind, run.turns, run.call.text) == (
        "error",
        "turn_limit",
        3,
        None,
    )
    assert [s.params.get("tool_choice") for s in specs] == [None, None, "none"]
    assert all(s.tools and s.metadata["replay_calls"] for s in specs)
    assert [s.metadata["turn"] for s in specs] == [1, 2, 3]
    assert run.call.cost_usd == pytest.approx(0.003) and run.call.tries == 3


def test_a_reused_tool_turn_without_its_calls_is_an_error_never_an_empty_answer(project: Project) -> None:
    scenario = project.scenarios[REFUND]
    _, call_turn = scripted(CallResult("ok", "", 1, 0.0, reused=True))

    run = asyncio.run(replay_loop(scenario, recorded_spec(scenario), call_turn))

    assert (run.call.status, run.call.error_kind, run.call.text) == (
        "error",
        "journal_without_tool_calls",
        None,
    )


def test_arguments_match_whatever_their_key_order_and_spacing(project: Project) -> None:
    replay = Replay(project.scenarios["converted.support-54499ac5f762"])

    answer = replay.answer(
        "get_shipment_tracking", '{ "tracking_number": "1Z9A41E80361502242", "carrier": "UPS" }'
    )

    assert answer.hit and answer.content.startswith("Nov 14 label created")
    assert replay.misses == 0


@pytest.mark.parametrize(
    ("name", "arguments", "why"),
    [
        (
            "get_shipment_tracking",
            '{"carrier": "FedEx", "tracking_number": "1Z9A41E80361502242"}',
            "no recorded result",
        ),
        ("delete_order", "{}", "no tool named 'delete_order' is offered"),
        ("lookup_order", "not json", "arguments are not valid JSON"),
    ],
)
def test_a_call_outside_the_recording_is_a_miss_with_an_error_result(
    project: Project, name: str, arguments: str, why: str
) -> None:
    replay = Replay(project.scenarios["converted.support-54499ac5f762"])

    answer = replay.answer(name, arguments)

    assert not answer.hit and answer.content.startswith(MISS_PREFIX) and why in answer.content
    assert replay.misses == 1


def test_a_call_recorded_twice_replays_its_results_in_order_then_repeats_the_last(project: Project) -> None:
    replay = Replay(project.scenarios[POLLING])
    args = {"ticket_number": "RT-19854"}

    states = [
        json.loads(replay.answer("check_refund_status", args).content)["refund_state"] for _ in range(3)
    ]

    assert states == ["processing", "sent", "sent"]

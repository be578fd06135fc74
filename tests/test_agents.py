"""Agent subjects (docs/agents.md): the agent's code runs per attempt, its model calls go through the
track's endpoint and the one spend path (real litellm sim provider, real SQLite journal, real sockets)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st
from shared import http_agent

from eval_assets.agent_protocol import AgentTask
from eval_assets.config import BuildManifest, EngineSettings, Project, validate_model
from eval_assets.engine import (
    AgentResult,
    AgentShapeError,
    AgentUnreachable,
    EndpointFailed,
    Engine,
    SubjectResult,
    load_entrypoint,
    parse_agent_result,
)
from eval_assets.providers.gateway import ModelGateway
from eval_assets.spend import Ceilings, SpendPath, open_journal, read_payload

ROOT = Path(__file__).resolve().parents[1]
TESTS = str(Path(__file__).resolve().parent)
# a generous per-try timeout: on a loaded machine a 5 s try may time out and be retried (a second key)
FAST = EngineSettings(
    concurrency_per_model=8, timeout_s=60, max_tries=2, backoff_base_s=0.001, backoff_max_s=0.005
)
REFUND = "converted.support-728838cd92b1"  # three recorded calls: lookup_order, get_refund_policy, ...
PLAIN = "support.refund-policy"  # no tools
EXAMPLE = {"entrypoint": "examples.agents.tool_agent:run"}


def manifest(agent: dict[str, Any], skill: float = 1.0) -> BuildManifest:
    return BuildManifest.model_validate(
        {
            "id": "b-agent",
            "milestone": 3,
            "subject": {
                "model": "sim/agent",
                "family": "sim",
                "params": {"skill": skill, "noise": 0.0, "seed": 3},
                "agent": agent,
            },
        }
    )


def engine(
    project: Project,
    journal: Path,
    ceilings: Ceilings | None = None,
    run_id: str = "r1",
    settings: EngineSettings = FAST,
) -> Engine:
    prices = {
        m: (p.input_per_mtok / 1e6, p.output_per_mtok / 1e6) for m, p in project.settings.prices.items()
    }
    spend = SpendPath(
        open_journal(f"sqlite:///{journal}"),
        ModelGateway(prices),
        run_id=run_id,
        ceilings_for=lambda ref: ceilings or Ceilings(),
    )
    return Engine(spend=spend, settings=settings, jitter=random.Random(0), agent_search=(str(ROOT), TESTS))


def attempt(eng: Engine, build: BuildManifest, scenario_id: str, project: Project) -> SubjectResult:
    return asyncio.run(eng.run_subject(build, project.scenarios[scenario_id], 1))


# --- subject kinds -----------------------------------------------------------------------------------


def test_entrypoint_agent_runs_its_local_tools_and_every_model_call_is_journaled_under_the_attempt(
    project: Project, tmp_path: Path
) -> None:
    eng = engine(project, tmp_path / "j.sqlite")

    result = attempt(eng, manifest(EXAMPLE), REFUND, project)

    rows = eng.spend.journal.rows()
    assert result.call.status == "ok" and "Answer to" in (result.call.text or "")
    # the example agent's tools the scenario declares (the write is asked for and, with nobody to
    # approve it in the capability track, denied: the model is still told so)
    local = {"lookup_order", "get_refund_policy", "create_return_ticket"}
    recorded = len({(e.tool, e.arguments) for e in project.scenarios[REFUND].replay if e.tool in local})
    assert result.turns == recorded + 1  # each tool call, then the answer
    assert result.call.tries == len(rows)  # every try of every call is a journal row (retries included)
    prefix = f"b-agent/-/{REFUND}/1/subject/"
    assert all(r.attempt_key.startswith(prefix) for r in rows)
    call_of = {r.attempt_key: (int(r.attempt_key.removeprefix(prefix)) - 1) // 100 + 1 for r in rows}
    assert set(call_of.values()) == set(range(1, recorded + 2))  # keyed per call index
    settled = [call_of[r.attempt_key] for r in rows if r.status == "settled"]
    assert sorted(settled) == list(range(1, recorded + 2))  # each call paid once
    assert all(r.cost_usd > 0 for r in rows if r.status == "settled")
    assert result.call.cost_usd == pytest.approx(sum(r.cost_usd for r in rows))
    assert result.trajectory is not None
    calls = result.trajectory["calls"]
    assert [c["index"] for c in calls] == list(range(1, recorded + 2))
    assert [bool(c["tool_calls"]) for c in calls] == [True] * recorded + [False]
    # what the agent sent back after each tool call: its local tools' results, not the recording's
    sent_tools = [m for c in calls for m in c["sent"] if m["role"] == "tool"]
    assert len(sent_tools) == recorded and any("Ridgeline 2 tent" in m["content"] for m in sent_tools)
    assert result.trajectory["notes"] == f"{recorded} tool calls"
    assert [i["outcome"] for i in result.trajectory["tool_invocations"]] == ["ok", "ok", "denied"]
    assert all(i["effect_sent_at"] is None for i in result.trajectory["tool_invocations"])


def test_a_worker_writes_its_result_under_the_scratch_it_is_given_and_a_killed_runs_leftovers_go(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "eval_home" / "tmp" / "agents"
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = scratch / f"agent-{int(gone.stdout)}-left"  # what a run killed mid-attempt leaves
    live = scratch / f"agent-{os.getppid()}-busy"  # an attempt of a process still running
    for left in (dead, live):
        left.mkdir(parents=True)
        (left / "result.json").write_text("{}")
    eng = engine(project, tmp_path / "j.sqlite")
    eng.agent_scratch = str(scratch)
    made: list[str] = []
    real_mkdtemp = tempfile.mkdtemp

    def watched(*args: Any, **kwargs: Any) -> str:
        made.append(real_mkdtemp(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", watched)
    result = attempt(eng, manifest(EXAMPLE), REFUND, project)
    assert result.call.status == "ok"
    assert made and all(
        Path(m).parent == scratch and Path(m).name.startswith(f"agent-{os.getpid()}-") for m in made
    )
    assert not dead.exists() and live.exists()
    assert sorted(p.name for p in scratch.iterdir()) == [live.name]  # its own removed when it ended


def test_a_rerun_answers_settled_calls_from_the_journal_and_pays_nothing_twice(
    project: Project, tmp_path: Path
) -> None:
    first = attempt(engine(project, tmp_path / "j.sqlite"), manifest(EXAMPLE), REFUND, project)
    again_engine = engine(project, tmp_path / "j.sqlite", run_id="r2")
    again = attempt(again_engine, manifest(EXAMPLE), REFUND, project)

    rows = again_engine.spend.journal.rows()
    assert again.call.text == first.call.text and again.call.reused
    assert len(rows) == first.call.tries and {r.run_id for r in rows} == {"r1"}  # nothing reserved by r2
    assert again.call.cost_usd == first.call.cost_usd
    assert all(c["reused"] for c in (again.trajectory or {})["calls"])


def test_streamed_calls_answer_the_same_text_as_the_journal_holds(project: Project, tmp_path: Path) -> None:
    eng = engine(project, tmp_path / "j.sqlite")

    result = attempt(eng, manifest({"entrypoint": "agent_fixtures:streams"}), PLAIN, project)

    (row,) = eng.spend.journal.rows()
    journaled, _ = read_payload(row.payload)  # the text, in the envelope that keeps the policy checks
    assert result.call.status == "ok" and result.call.text == journaled and "Answer to" in (journaled or "")


def test_http_agent_gets_the_task_as_json_and_its_calls_go_through_the_endpoint(
    project: Project, tmp_path: Path
) -> None:
    # the example agent, found the way the engine finds it (the project root on the search path), so the
    # test does not depend on whether an earlier test in this worker already put the root on sys.path
    run_agent = load_entrypoint(EXAMPLE["entrypoint"], search=(str(ROOT),))
    seen: list[dict[str, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        task = await request.json()
        seen.append(task)
        # the protocol's client, as an HTTP agent written in Python would use it
        return web.json_response(await run_agent(AgentTask.from_json(task)))

    async def main() -> SubjectResult:
        async with http_agent(handle) as url:
            eng = engine(project, tmp_path / "j.sqlite")
            return await eng.run_subject(manifest({"http": url}), project.scenarios[REFUND], 2)

    result = asyncio.run(main())

    assert result.call.status == "ok" and result.turns == 4  # three tool calls (the write denied), the answer
    (task,) = seen
    assert set(task) == {
        "attempt_id",
        "build",
        "scenario_id",
        "repeat",
        "messages",
        "tools",
        "base_url",
        "api_key",
        "model",
        "now",
        "seed",
        "state_dir",
    }
    assert (task["attempt_id"], task["model"], task["repeat"]) == (f"b-agent/{REFUND}/2", "sim/agent", 2)
    assert task["base_url"].startswith("http://127.0.0.1:") and task["api_key"]


# --- bad agents: an outcome with a reason, never a score ---------------------------------------------


@pytest.mark.parametrize(
    ("agent", "kind", "says"),
    [
        ("agent_fixtures:raises", "agent_raised", "RuntimeError: tool registry is empty"),
        ("agent_fixtures:wrong_shape", "agent_shape", "result.answer: unknown field"),
        ("agent_fixtures:output_not_text", "agent_shape", "result.output: expected a string, got int"),
        ("agent_fixtures:not_async", "agent_raised", "is not an async function"),
        ("agent_fixtures:no_such_function", "agent_raised", "AttributeError"),
    ],
)
def test_a_bad_agent_is_an_error_attempt_with_one_line_naming_why(
    project: Project, tmp_path: Path, agent: str, kind: str, says: str
) -> None:
    result = attempt(engine(project, tmp_path / "j.sqlite"), manifest({"entrypoint": agent}), PLAIN, project)

    assert (result.call.status, result.call.error_kind, result.call.text) == ("error", kind, None)
    assert says in (result.call.error or "") and "\n" not in (result.call.error or "")
    assert "Traceback" not in (result.call.error or "")


def test_a_hanging_agent_times_out(project: Project, tmp_path: Path) -> None:
    build = manifest({"entrypoint": "agent_fixtures:hangs", "timeout_s": 0.3})

    result = attempt(engine(project, tmp_path / "j.sqlite"), build, PLAIN, project)

    assert (result.call.status, result.call.error_kind) == ("error", "agent_timeout")
    assert "timeout_s=0.3" in (result.call.error or "")


def test_a_ceiling_refusal_answers_429_and_excludes_the_attempt_whatever_the_agent_returns(
    project: Project, tmp_path: Path
) -> None:
    eng = engine(project, tmp_path / "j.sqlite", ceilings=Ceilings(scenario_usd=0.0))

    result = attempt(eng, manifest({"entrypoint": "agent_fixtures:keeps_calling"}), PLAIN, project)

    assert result.call.status == "excluded" and "scenario ceiling" in (result.call.excluded_reason or "")
    assert result.call.text is None and result.call.cost_usd == 0.0
    assert (result.trajectory or {})["output"] is None
    assert (result.trajectory or {})["notes"] == "stopped: 429"  # what the agent was answered
    assert [(r.status, r.cost_usd) for r in eng.spend.journal.rows()] == [("refused", None)]  # nothing paid


def test_an_http_agent_that_is_down_refuses_the_run_naming_its_url(project: Project, tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/attempt"

    with pytest.raises(AgentUnreachable, match=url):
        attempt(engine(project, tmp_path / "j.sqlite"), manifest({"http": url}), PLAIN, project)


# --- the track's own failures are never the agent's ---------------------------------------------------


@pytest.mark.e2e
def test_forty_attempts_started_at_once_on_a_busy_machine_all_reach_the_endpoint(tmp_path: Path) -> None:
    # a client with the OpenAI SDK's default 5 s connect timeout and no retries, 40 attempts at once in
    # a fresh process, while a CPU hog runs on every core: no attempt may fail for a reason of the
    # track's own (a stalled endpoint was APITimeoutError, recorded as the agent's)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        burst = subprocess.run(
            [sys.executable, str(Path(TESTS) / "agent_burst.py"), str(tmp_path / "j.sqlite"), "40"],
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()

    results = json.loads(burst.stdout.strip().splitlines()[-1])
    assert len(results) == 40
    assert [r for r in results if r[1] != "ok"] == []


def test_an_attempt_whose_agent_could_not_connect_to_the_endpoint_is_tried_again(
    project: Project, tmp_path: Path
) -> None:
    eng = engine(project, tmp_path / "j.sqlite")

    result = attempt(eng, manifest({"entrypoint": "agent_fixtures:endpoint_refused_once"}), REFUND, project)

    assert result.call.status == "ok" and result.call.error_kind is None and result.turns == 4


def test_an_agent_that_never_reaches_the_endpoint_fails_the_run_as_the_tracks_failure_not_the_agents(
    project: Project, tmp_path: Path
) -> None:
    eng = engine(project, tmp_path / "j.sqlite")
    build = manifest({"entrypoint": "agent_fixtures:endpoint_always_refused"})

    with pytest.raises(EndpointFailed, match="track's own endpoint in 3 tries .*ConnectError"):
        attempt(eng, build, PLAIN, project)
    # each try asked call 1 under the same key: paid once, answered from the journal afterwards
    assert [r.status for r in eng.spend.journal.rows()] == ["settled"]


def test_an_agent_refused_by_a_service_of_its_own_is_the_agents_failure(
    project: Project, tmp_path: Path
) -> None:
    result = attempt(
        engine(project, tmp_path / "j.sqlite"),
        manifest({"entrypoint": "agent_fixtures:other_host_refused"}),
        PLAIN,
        project,
    )

    assert (result.call.status, result.call.error_kind) == ("error", "agent_raised")
    assert result.call.error == "ConnectError: [Errno 111] Connection refused"


def test_the_endpoint_refuses_a_call_without_the_attempts_token(project: Project, tmp_path: Path) -> None:
    eng = engine(project, tmp_path / "j.sqlite")
    result = attempt(eng, manifest({"entrypoint": "agent_fixtures:wrong_token"}), PLAIN, project)

    assert result.call.text == "401" and eng.spend.journal.rows() == []


# --- the result shape and the manifest --------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@given(JSON | st.fixed_dictionaries({"output": JSON}, optional={"notes": JSON}))
def test_any_agent_result_is_either_the_documented_shape_or_an_error_naming_a_result_field(
    value: Any,
) -> None:
    try:
        parsed = parse_agent_result(value)
    except AgentShapeError as exc:
        assert str(exc).startswith("result")
        return
    assert isinstance(parsed, AgentResult) and isinstance(parsed.output, str)
    assert parsed.notes is None or isinstance(parsed.notes, str)
    assert isinstance(value, dict) and value["output"] == parsed.output and set(value) <= {"output", "notes"}


@pytest.mark.parametrize(
    ("agent", "says"),
    [
        ({}, "exactly one of"),
        ({"entrypoint": "a.b:c", "http": "http://127.0.0.1:1/"}, "exactly one of"),
        ({"entrypoint": "not an entrypoint"}, "entrypoint"),
        ({"http": "ftp://x"}, "http"),
        ({"http": "http://127.0.0.1:9/?key=" + "sk-" + "abcdefghijklmnopqrstuvwxyz012345"}, "OPENAI_API_KEY"),
    ],
)
def test_a_manifest_agent_must_name_exactly_one_way_to_reach_it(agent: dict[str, Any], says: str) -> None:
    data = json.loads(manifest(EXAMPLE).model_dump_json())
    data["subject"]["agent"] = agent
    parsed, problems = validate_model(BuildManifest, data, "b.yaml")
    assert parsed is None and any(says in str(p) for p in problems), problems


# --- the judge sees the trajectory when the rubric asks ---------------------------------------------


def test_the_judge_sees_the_stored_trajectory_inside_the_fence_only_when_the_rubric_asks(
    project: Project, tmp_path: Path
) -> None:
    from eval_assets.engine import judge_spec
    from eval_assets.fence import fenced_content

    result = attempt(engine(project, tmp_path / "j.sqlite"), manifest(EXAMPLE), REFUND, project)
    stored = result.stored()
    judge = project.judges["helpfulness-v1"]
    rubric = project.rubric_for(judge)

    def prompt(sees: bool) -> str:
        spec = judge_spec(
            judge,
            rubric.model_copy(update={"judge_sees_trajectory": sees}),
            project.scenarios[REFUND],
            stored.output or "",
            nonce="0" * 32,
            build="b-agent",
            repeat=1,
            timeout_s=5,
            trajectory=stored.trajectory,
        )
        return str(spec.messages[1]["content"])

    shown = fenced_content(prompt(True), "AGENT TRAJECTORY")
    assert shown is not None and json.loads(shown)["calls"][0]["index"] == 1
    assert "lookup_order" in shown and fenced_content(prompt(True), "SUBJECT OUTPUT") == stored.output
    assert fenced_content(prompt(False), "AGENT TRAJECTORY") is None


def test_the_stored_trajectory_is_redacted(project: Project, tmp_path: Path) -> None:
    from eval_assets.engine import stored_trajectory

    secret = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    text = stored_trajectory(
        {"calls": [{"sent": [{"role": "tool", "content": f"key {secret}"}]}], "notes": secret}
    )

    assert text is not None and secret not in text and "[redacted]" in text


def test_the_shipped_hosted_judge_loads_with_the_project_rubric_and_has_a_price(project: Project) -> None:
    from eval_assets.config import Judge, load_file

    path = ROOT / "examples/judges/helpfulness-v2.yaml"
    judge, problems = load_file(Judge, path, ROOT)

    assert problems == [] and judge is not None
    assert judge.model == "openai/gpt-4o-mini" and judge.family != "sim"
    assert project.rubric_for(judge).key == "helpfulness-v1"
    inp, out = ModelGateway({}).price(judge.model)  # litellm's own price map, offline
    assert 0 < inp < out


@pytest.mark.parametrize(
    "entrypoint", ["dagster:asset", "dagster_k8s.x:y", "eval_assets.defs.jobs:x", "eval_assets.cli:main"]
)
def test_an_entrypoint_in_dagster_or_the_wiring_is_refused_before_it_is_imported(entrypoint: str) -> None:
    from eval_assets.engine import load_entrypoint

    with pytest.raises(ImportError, match="never Dagster or the track's Dagster wiring"):
        load_entrypoint(entrypoint)

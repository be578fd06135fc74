"""Contract of the agent protocol port (eval_assets/ports.py, docs/agents.md): the same agent code, reached
each way a build may name it, gets the same task, makes its model calls through the track's endpoint
under the attempt's token, and its result is taken or refused by the same rules.

Implementations (`IMPLEMENTATIONS`):

- `entrypoint`: `subject.agent: {entrypoint: module:function}`, the function awaited per attempt;
- `http`: `subject.agent: {http: URL}`, a real aiohttp server on 127.0.0.1 (started and stopped by the
  test) that hands the POSTed task to the same function and answers its result as JSON.

Real litellm sim provider behind the endpoint, real SQLite journal, real sockets.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from shared import http_agent

from eval_assets.agent_protocol import AgentTask
from eval_assets.config import BuildManifest, EngineSettings, Project
from eval_assets.engine import Engine, SubjectResult, load_entrypoint
from eval_assets.providers.gateway import ModelGateway
from eval_assets.spend import SpendPath, open_journal

IMPLEMENTATIONS = ("entrypoint", "http")  # registered against the port (eval_assets/ports.py)
ROOT = Path(__file__).resolve().parents[1]
TESTS = str(Path(__file__).resolve().parent)
SEARCH = (str(ROOT), TESTS)
SETTINGS = EngineSettings(
    concurrency_per_model=8, timeout_s=60, max_tries=2, backoff_base_s=0.001, backoff_max_s=0.005
)
REFUND = "converted.support-728838cd92b1"  # recorded calls to the example agent's two local tools
PLAIN = "support.refund-policy"  # no tools
EXAMPLE = "examples.agents.tool_agent:run"
TASK_FIELDS = {
    "attempt_id", "build", "scenario_id", "repeat", "messages", "tools", "base_url", "api_key", "model",
    "now", "seed", "state_dir",
}  # fmt: skip
WATCH = "EVALTRACK_CONTRACT_WATCH"  # the entry point's process reads what to watch from here


def _manifest(agent: dict[str, Any]) -> BuildManifest:
    return BuildManifest.model_validate(
        {
            "id": "b-agent",
            "milestone": 3,
            "subject": {
                "model": "sim/agent",
                "family": "sim",
                "params": {"skill": 1.0, "noise": 0.0, "seed": 3},
                "agent": agent,
            },
        }
    )


def _engine(project: Project, journal: Path, run_id: str) -> Engine:
    prices = {m: (p.input_per_mtok / 1e6, p.output_per_mtok / 1e6) for m, p in project.settings.prices.items()}
    spend = SpendPath(open_journal(f"sqlite:///{journal}"), ModelGateway(prices), run_id=run_id)
    return Engine(spend=spend, settings=SETTINGS, jitter=random.Random(0), agent_search=SEARCH)


class Agent:
    """One way of reaching an agent function: `attempt` runs one attempt of it on a scenario and
    returns the result and every task the agent was handed."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def attempt(
        self, eng: Engine, project: Project, entrypoint: str, scenario: str, repeat: int = 1
    ) -> tuple[SubjectResult, list[dict[str, Any]]]:
        seen: list[dict[str, Any]] = []
        if self.kind == "entrypoint":
            # an entry point runs in a process of its own: it names the watched function and writes
            # each task it is handed to a file this process reads back
            with tempfile.TemporaryDirectory() as scratch:
                log = Path(scratch) / "seen.jsonl"
                os.environ[WATCH] = json.dumps({"entrypoint": entrypoint, "log": str(log)})
                try:
                    result = asyncio.run(self._entrypoint(eng, project, scenario, repeat))
                finally:
                    del os.environ[WATCH]
                if log.exists():
                    seen = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
            return result, seen
        function = load_entrypoint(entrypoint, search=SEARCH)

        async def watched(task: Any) -> Any:
            seen.append(task.to_json() if hasattr(task, "to_json") else dict(task))
            return await function(task)

        return asyncio.run(self._http(eng, project, watched, scenario, repeat)), seen

    @staticmethod
    async def _entrypoint(eng: Engine, project: Project, scenario: str, repeat: int) -> SubjectResult:
        manifest = _manifest({"entrypoint": f"{__name__}:watched_agent"})
        return await eng.run_subject(manifest, project.scenarios[scenario], repeat)

    @staticmethod
    async def _http(
        eng: Engine, project: Project, function: Callable[[Any], Awaitable[Any]], scenario: str, repeat: int
    ) -> SubjectResult:
        async def handle(request: web.Request) -> web.Response:
            # a Python HTTP agent reads the body as the protocol's task (its intervention client included)
            return web.json_response(await function(AgentTask.from_json(await request.json())))

        async with http_agent(handle) as url:
            return await eng.run_subject(_manifest({"http": url}), project.scenarios[scenario], repeat)


async def watched_agent(task: Any) -> Any:
    """The entry point the `entrypoint` implementation names: records the task, then runs the function
    the test is watching (both named in the environment the attempt's process inherits)."""
    watch = json.loads(os.environ[WATCH])
    with open(watch["log"], "a", encoding="utf-8") as out:
        out.write(json.dumps(task.to_json()) + "\n")
    return await load_entrypoint(watch["entrypoint"], search=SEARCH)(task)


@pytest.fixture(params=IMPLEMENTATIONS)
def agent(request: pytest.FixtureRequest) -> Agent:
    return Agent(str(request.param))


def test_the_agent_gets_the_documented_task_and_its_tool_loop_goes_through_the_endpoint(
    agent: Agent, project: Project, tmp_path: Path
) -> None:
    eng = _engine(project, tmp_path / "j.sqlite", "r1")

    result, seen = agent.attempt(eng, project, EXAMPLE, REFUND, repeat=2)

    assert result.call.status == "ok" and "Answer to" in (result.call.text or ""), result.call
    assert result.turns == 4  # three tool calls (two reads, the write it is denied), then the answer
    (task,) = seen
    assert set(task) == TASK_FIELDS
    assert (task["attempt_id"], task["model"], task["repeat"]) == (f"b-agent/{REFUND}/2", "sim/agent", 2)
    assert task["base_url"].startswith("http://127.0.0.1:") and task["api_key"]
    rows = eng.spend.journal.rows()
    assert all(r.attempt_key.startswith(f"b-agent/-/{REFUND}/2/subject/") for r in rows)
    settled = [r.attempt_key for r in rows if r.status == "settled"]
    assert len(settled) == len(set(settled)) == 4  # each model call paid once, under its own key
    assert result.call.cost_usd == pytest.approx(sum(r.cost_usd or 0.0 for r in rows))
    calls = (result.trajectory or {})["calls"]
    assert [bool(c["tool_calls"]) for c in calls] == [True, True, True, False]


def test_a_rerun_answers_the_agents_calls_from_the_journal_and_pays_nothing_twice(
    agent: Agent, project: Project, tmp_path: Path
) -> None:
    first, _ = agent.attempt(_engine(project, tmp_path / "j.sqlite", "r1"), project, EXAMPLE, REFUND)
    again_engine = _engine(project, tmp_path / "j.sqlite", "r2")

    again, _ = agent.attempt(again_engine, project, EXAMPLE, REFUND)

    assert again.call.text == first.call.text and again.call.reused
    assert {r.run_id for r in again_engine.spend.journal.rows()} == {"r1"}  # nothing reserved by r2
    assert all(c["reused"] for c in (again.trajectory or {})["calls"])


def test_a_result_not_of_the_documented_shape_is_an_error_attempt_naming_the_field(
    agent: Agent, project: Project, tmp_path: Path
) -> None:
    result, _ = agent.attempt(_engine(project, tmp_path / "j.sqlite", "r1"), project, "agent_fixtures:wrong_shape", PLAIN)

    assert (result.call.status, result.call.error_kind, result.call.text) == ("error", "agent_shape", None)
    assert "result.answer: unknown field" in (result.call.error or "")


def test_a_call_without_the_attempts_token_is_refused_and_nothing_is_paid(
    agent: Agent, project: Project, tmp_path: Path
) -> None:
    eng = _engine(project, tmp_path / "j.sqlite", "r1")

    result, _ = agent.attempt(eng, project, "agent_fixtures:wrong_token", PLAIN)

    assert result.call.text == "401" and eng.spend.journal.rows() == []

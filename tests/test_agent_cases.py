"""Agent cases (docs/specs/deterministic-suite.md, "Agent cases"; docs/agents.md, "Interventions"): a case
runs the build's agent through the track's endpoint with a model script, scripted interventions and
kills; its assertions read what the agent reported. Also the agent's hard bounds (its own process
group, killed whole). Real processes, real sockets, real litellm script provider, real SQLite."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from eval_assets.config import (
    Agent,
    BuildManifest,
    EngineSettings,
    Project,
    Subject,
    parse_assertions,
    parse_interventions,
)
from eval_assets.engine import AttemptControl, Engine
from eval_assets.gates import (
    REVIEW_QUEUE_HOOK,
    CaseRun,
    GateContext,
    case_outcome,
    checked_kinds,
    failed_assertions,
    load_case,
    read_registry,
    run_suite,
)
from eval_assets.providers.gateway import ModelGateway
from eval_assets.review import UncertainEffects
from eval_assets.spend import SpendPath, open_journal

ROOT = Path(__file__).resolve().parents[1]
TESTS = str(Path(__file__).resolve().parent)
EXAMPLE = ROOT / "examples/agents/tool_agent.py"
AGENT_CASES = ROOT / "gates/cases/agent"
AGENT_GATES = sorted(
    g.id for g in read_registry(ROOT, check_imports=False).gates if g.id.startswith("agent.")
)


def subject(entrypoint: str = "examples.agents.tool_agent:run") -> Subject:
    manifest = BuildManifest.model_validate(
        {
            "id": "b",
            "milestone": 4,
            "subject": {
                "model": "sim/agent",
                "family": "sim",
                "params": {"skill": 0.75, "noise": 0.12, "seed": 21},
                "agent": {"entrypoint": entrypoint, "timeout_s": 40},
            },
        }
    )
    return manifest.subject


def run_case(project: Project, name: str, entrypoint: str = "examples.agents.tool_agent:run") -> Any:
    case, problems = load_case(AGENT_CASES / f"{name}.yaml")
    assert case is not None, problems
    ctx = GateContext(
        root=ROOT,
        gate_id=f"agent.{name}",
        kind="case",
        build="b",
        milestone=4,
        subject=subject(entrypoint),
        project_loader=lambda: project,
        hooks={REVIEW_QUEUE_HOOK: UncertainEffects},
    )
    return case_outcome(case, ctx)


def copy_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, old: str, new: str) -> str:
    """A copy of the example agent with one behaviour removed (`old` replaced by `new`)."""
    text = EXAMPLE.read_text()
    assert text.count(old) == 1, f"the example agent no longer holds {old!r}"
    (tmp_path / f"{name}.py").write_text(text.replace(old, new))
    monkeypatch.syspath_prepend(str(tmp_path))  # the attempt's worker process inherits sys.path
    return f"{name}:run"


NO_APPROVAL = (
    '    if state not in ("approved", "started"):  # started and not sent: approved before, run it again\n',
    "    if False:  # this copy no longer asks for approval before its write tool\n",
)
NO_WATERMARK = (
    "json.loads(self.path.read_text()) if self.path is not None and self.path.exists() else {}",
    "{}",
)


# --- the example agent, every case -----------------------------------------------------------------


def test_every_agent_case_passes_for_the_example_agent_offline() -> None:
    assert len(AGENT_GATES) >= 10
    result = run_suite(
        read_registry(ROOT),
        milestone=4,
        build="tool-agent-example",
        subject=subject(),
        only=set(AGENT_GATES),
        hooks={REVIEW_QUEUE_HOOK: UncertainEffects},
    )

    rows = {r.gate_id: (r.status, r.message) for r in result.results}
    assert set(rows) == set(AGENT_GATES)
    assert {g: s for g, (s, _) in rows.items() if s != "pass"} == {}, rows


def test_agent_cases_are_pending_before_milestone_4() -> None:
    result = run_suite(read_registry(ROOT), milestone=3, build="b", subject=subject(), only=set(AGENT_GATES))

    assert {r.status for r in result.results} == {"pending"}


# --- copies of the example agent with one behaviour removed ------------------------------------------


def test_a_copy_that_no_longer_asks_before_its_write_fails_the_approval_cases_naming_the_assertion(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = copy_agent(tmp_path, monkeypatch, "agent_no_approval", *NO_APPROVAL)

    granted = run_case(project, "approval-granted", entry)
    denied = run_case(project, "approval-denied", entry)

    assert not granted.passed and not denied.passed
    assert any(f.startswith("interventions: [{'asked': 'approval'") for f in granted.findings)
    assert any(f.startswith("effects: []") and "create_return_ticket" in f for f in denied.findings)


def test_a_copy_that_ignores_the_watermark_fails_18a_and_18b(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = copy_agent(tmp_path, monkeypatch, "agent_no_watermark", *NO_WATERMARK)

    before = run_case(project, "kill-before-watermark", entry)
    after = run_case(project, "kill-after-watermark", entry)

    assert not before.passed and not after.passed
    assert any("unscripted approval ask" in f for f in after.findings)  # it asked again, as if new
    assert any(f.startswith("review_items: 1") for f in after.findings)


def test_the_kill_after_watermark_case_reads_uncertain_the_review_item_and_what_the_model_was_told(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the copy tells the model the write failed instead of that its outcome is unknown
    entry = copy_agent(
        tmp_path,
        monkeypatch,
        "agent_says_failed",
        'UNCERTAIN = (\n    "UNCERTAIN: the request',
        'UNCERTAIN = (\n    "FAILED: the request',
    )

    outcome = run_case(project, "kill-after-watermark", entry)

    assert not outcome.passed
    assert [f.split(" — ")[0] for f in outcome.findings] == ["model_told: '^UNCERTAIN: .*outcome is unknown'"]


# --- each assertion type holds and fails on its own --------------------------------------------------

AGENT_RUN = CaseRun(
    output="Cancelled: create_return_ticket cancelled by eval.approver.",
    policy_failures=0,
    agent=True,
    tool_calls=({"name": "lookup_order", "arguments": '{"order_number": "NW-1"}'},),
    effects=({"tool": "create_return_ticket", "id": "call_t", "outcome": "ok"},),
    events=(
        "model_call",
        "asked:approval",
        "answered:approved",
        "effect_sent:create_return_ticket",
        "output",
    ),
    interventions=({"asked": "approval", "tool": "create_return_ticket", "answered": "approved"},),
    review_items=1,
    told=("UNCERTAIN: outcome is unknown",),
)
HOLDS_AND_FAILS: list[tuple[str, Any, Any]] = [
    ("effects", [{"tool": "create_return_ticket", "id": "call_t"}], ["lookup_order"]),
    ("effects", ["create_return_ticket"], []),
    ("event_order", ["asked:approval", "effect_sent", "output"], ["effect_sent", "asked:approval"]),
    ("event_order", ["model_call", "answered:approved"], ["answered:denied"]),
    (
        "tool_calls",
        [{"name": "lookup_order", "arguments": {"order_number": "NW-1"}}],
        [{"name": "lookup_order", "arguments": {"order_number": "NW-2"}}],
    ),
    ("tool_calls", ["lookup_order"], ["lookup_order", "lookup_order"]),
    (
        "interventions",
        [{"asked": "approval", "answered": "approved"}],
        [{"asked": "approval", "answered": "denied"}],
    ),
    ("interventions", [{"asked": "approval", "tool": "create_return_ticket", "answered": "approved"}], []),
    ("output_matches", "^Cancelled", "^Done"),
    ("output_matches", r"approver\.$", "Done$"),  # the output itself, nothing appended
    ("review_items", 1, 0),
    ("model_told", "outcome is unknown", "failed"),
    ("model_told", "^UNCERTAIN", "Cancelled"),  # what the model was sent, not the final output
]


@pytest.mark.parametrize(("kind", "holds", "fails"), HOLDS_AND_FAILS)
def test_each_agent_assertion_holds_for_a_matching_run_and_fails_for_another(
    kind: str, holds: Any, fails: Any
) -> None:
    run = AGENT_RUN if kind == "effects" else replace(AGENT_RUN, effects=())  # `effects: []` is implied
    assert failed_assertions(parse_assertions([{kind: holds}]), run) == []
    (line,) = failed_assertions(parse_assertions([{kind: fails}]), run)
    assert line.startswith(f"{kind}: ")


def test_an_agent_case_that_says_nothing_about_effects_asserts_none() -> None:
    (line,) = failed_assertions(parse_assertions([{"output_matches": "."}]), AGENT_RUN)
    assert line.startswith("effects: [] (unsaid)")
    quiet = CaseRun(output="x", policy_failures=0, agent=True)
    assert failed_assertions(parse_assertions([{"output_matches": "."}]), quiet) == []


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ({"effect": []}, "unknown assertion 'effect'"),
        ({"effects": "create_return_ticket"}, "effects: expected a list"),
        ({"effects": [{"tool": "x", "when": 1}]}, "unknown field 'when'"),
        ({"event_order": ["model_call", "teleported"]}, "event_order[1]"),
        ({"event_order": []}, "non-empty list"),
        ({"tool_calls": [{"arguments": {}}]}, "tool_calls[0]: expected a name"),
        ({"interventions": [{"asked": "permission"}]}, "interventions[0].asked"),
        ({"interventions": [{"asked": "approval", "answered": "maybe"}]}, "interventions[0].answered"),
        ({"output_matches": "(unclosed"}, "not a regular expression"),
        ({"model_told": ""}, "non-empty regular expression"),
        ({"review_items": -1}, "whole number"),
    ],
)
def test_a_malformed_agent_assertion_is_refused_naming_it(item: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match="assertion 0: ") as caught:
        parse_assertions([item])
    assert says in str(caught.value)


# --- interventions: the attempt control -------------------------------------------------------------


def approval(call: str = "c1") -> dict[str, Any]:
    return {"kind": "approval", "tool_call_id": call, "tool": "create_return_ticket", "arguments": "{}"}


def test_scripted_answers_come_in_order_from_eval_approver() -> None:
    control = AttemptControl(
        script=parse_interventions(["approve", {"deny": "no"}, {"answer": "yes"}, "cancel"])
    )

    told = [control.ask(approval("a")), control.ask(approval("b"))]
    told += [control.ask({"kind": "question", "text": "?"}), control.ask(approval("c"))]

    assert [(t["decision"], t["principal"]) for t in told] == [
        ("approved", "eval.approver"),
        ("denied", "eval.approver"),
        ("answer", "eval.approver"),
        ("cancel", "eval.approver"),
    ]
    assert (told[1]["reason"], told[2]["text"]) == ("no", "yes")
    assert control.unreached() == [] and control.problems == []


def test_an_ask_nothing_scripted_answers_is_refused_and_recorded() -> None:
    control = AttemptControl(script=parse_interventions(["approve"]))
    control.ask(approval())
    with pytest.raises(Exception, match="nothing scripted answers") as refused:
        control.ask(approval("again"))
    assert getattr(refused.value, "status", None) == 409 and control.problems


def test_without_a_script_nobody_answers_so_every_ask_is_denied() -> None:
    told = AttemptControl().ask(approval())
    assert (told["decision"], told["principal"]) == ("denied", "eval.track")


def test_kill_and_disconnect_fire_only_at_their_scripted_point() -> None:
    control = AttemptControl(
        script=parse_interventions(
            [{"disconnect": {"call": 2}}, {"kill_worker": {"at": "effect_sent", "tool": "w"}}]
        )
    )
    control.kill = lambda: None
    assert not control.disconnects(1)
    assert control.disconnects(2)
    assert not control.report({"event": "tool_started", "tool_call_id": "c", "tool": "w"})
    assert not control.report({"event": "effect_sent", "tool_call_id": "c", "tool": "other", "at": "t"})
    assert control.report({"event": "effect_sent", "tool_call_id": "c", "tool": "w", "at": "t"})
    assert control.unreached() == []


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ("approved", "an intervention is"),
        ({"kill_worker": {"at": "tool_finished", "tool": "w"}}, "kill_worker.at"),
        ({"disconnect": {"call": 0}}, "disconnect"),
        ({"deny": ""}, "deny"),
        ({"pause": 1}, "unknown intervention 'pause'"),
    ],
)
def test_a_malformed_intervention_is_refused(item: Any, says: str) -> None:
    with pytest.raises(ValueError, match="intervention 0: ") as caught:
        parse_interventions([item])
    assert says in str(caught.value)


def test_tool_invocations_are_stored_in_model_call_order_not_arrival_order() -> None:
    control = AttemptControl()
    control.model_call(1, "ok", [{"id": "b", "name": "t"}, {"id": "a", "name": "t"}])
    for call_id in ("a", "b"):  # a concurrent batch whose second call reports first
        control.report({"event": "tool_started", "tool_call_id": call_id, "tool": "t"})
    assert [i["id"] for i in control.tool_invocations()] == ["b", "a"]


# --- hard bounds: the attempt's process group ---------------------------------------------------------


def _engine(project: Project, journal: Path) -> Engine:
    prices = {
        m: (p.input_per_mtok / 1e6, p.output_per_mtok / 1e6) for m, p in project.settings.prices.items()
    }
    spend = SpendPath(open_journal(f"sqlite:///{journal}"), ModelGateway(prices), run_id="r")
    settings = EngineSettings(concurrency_per_model=2, timeout_s=60, max_tries=1)
    return Engine(spend=spend, settings=settings, jitter=random.Random(0), agent_search=(str(ROOT), TESTS))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _survivors(pids: list[int], within_s: float = 10.0) -> list[int]:
    """The pids still alive once SIGKILL had time to land (a bounded wait, never a pinned one)."""
    deadline = time.monotonic() + within_s
    while (alive := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


@pytest.mark.parametrize(
    ("agent", "timeout_s", "status", "kind"),
    [
        ("agent_bound_fixtures:swallows_cancel_then_spins", 2.0, "error", "agent_timeout"),
        ("agent_bound_fixtures:forks_and_hangs", 2.0, "error", "agent_timeout"),
        ("agent_bound_fixtures:forks_and_returns", 60.0, "ok", None),
    ],
)
def test_nothing_an_entrypoint_agent_started_outlives_its_attempt(
    project: Project,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    agent: str,
    timeout_s: float,
    status: str,
    kind: str | None,
) -> None:
    pids = tmp_path / "pids"
    monkeypatch.setenv("EVALTRACK_TEST_PIDS", str(pids))
    build = BuildManifest.model_validate(
        {
            "id": "b",
            "milestone": 3,
            "subject": {
                "model": "sim/agent",
                "family": "sim",
                "agent": {"entrypoint": agent, "timeout_s": timeout_s},
            },
        }
    )
    eng = _engine(project, tmp_path / "j.sqlite")

    result = asyncio.run(eng.run_subject(build, project.scenarios["support.refund-policy"], 1))

    assert (result.call.status, result.call.error_kind) == (status, kind)
    started = [int(p) for p in pids.read_text().split()]
    assert started  # the agent itself, and what it started
    assert _survivors(started) == []


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://127.0.0.1:8900/attempt", True),
        ("http://127.0.0.2:1/", True),
        ("http://[::1]:8900/", True),
        ("http://localhost:8900/", True),
        ("http://localhost.example.com/", False),
        ("http://10.0.0.5:8900/", False),
        ("https://agent.example.com/attempt", False),
    ],
)
def test_an_http_agent_must_be_loopback_unless_the_manifest_allows_remote(url: str, allowed: bool) -> None:
    if allowed:
        Agent(http=url)
    else:
        with pytest.raises(ValidationError, match="not a loopback address"):
            Agent(http=url)
        assert Agent(http=url, allow_remote=True).http == url


# --- the release gate sees the agent ----------------------------------------------------------------


@pytest.mark.e2e  # the slow lane: an agent build through the CLI, a process per attempt
def test_release_status_blocks_a_copy_that_no_longer_asks_for_approval_naming_the_case_and_assertion(
    tmp_path: Path,
) -> None:
    """A project with the example agent's scenario and cases; the copy registered as a build; `run`,
    then `release-status`: exit 1, the reasons naming the agent case and the failing assertion, and no
    blocking reason from the capability track."""
    import shutil
    import subprocess
    import sys

    project = tmp_path / "project"
    (project / "gates").mkdir(parents=True)
    for part in ("evaltrack.yaml", "rubrics", "judges", "gates/agent.yaml", "gates/cases/agent"):
        (shutil.copytree if (ROOT / part).is_dir() else shutil.copy)(ROOT / part, project / part)
    shutil.copytree(ROOT / "scenarios/support", project / "scenarios/support")  # a noise band needs a few
    shutil.copy(ROOT / "scenarios/converted/converted.support-728838cd92b1.yaml", project / "scenarios")
    shutil.copy(
        ROOT / "scenarios/safety/safety.credential-exfiltration.yaml", project / "scenarios"
    )  # safety-v1
    for path in (project / "scenarios").rglob("*.yaml"):  # the fewest repeats: the suite is what blocks
        path.write_text(re.sub(r"(?m)^repeats: \d+$", "repeats: 2", path.read_text()))
    (project / "gates/fixtures/models").mkdir(parents=True)
    for script in (ROOT / "gates/fixtures/models").glob("agent-*.yaml"):
        shutil.copy(script, project / "gates/fixtures/models")
    text = EXAMPLE.read_text()
    assert text.count(NO_APPROVAL[0]) == 1
    (project / "agent_no_approval.py").write_text(text.replace(*NO_APPROVAL))
    manifest = (ROOT / "examples/agents/tool-agent.yaml").read_text()
    manifest = manifest.replace("id: tool-agent-example", "id: tool-agent-no-approval")
    (project / "build.yaml").write_text(
        manifest.replace("examples.agents.tool_agent:run", "agent_no_approval:run")
    )
    home = tmp_path / "home"

    def evaltrack(*args: str) -> subprocess.CompletedProcess[str]:
        command = [
            sys.executable,
            "-m",
            "eval_assets.cli",
            "--project",
            str(project),
            "--home",
            str(home),
            *args,
        ]
        env = {**os.environ, "COLUMNS": "200"}  # a wide table: one line per reason, whatever runs the test
        return subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path, env=env)

    assert evaltrack("build", "add", str(project / "build.yaml")).returncode == 0
    ran = evaltrack("run", "--build", "tool-agent-no-approval")
    assert "release_decision" in ran.stdout, ran.stdout[-2000:] + ran.stderr[-2000:]
    status = evaltrack("release-status", "tool-agent-no-approval")

    assert status.returncode == 1, status.stdout + status.stderr
    assert "agent.approval-granted" in status.stdout  # the text names the case (its reasons wrap whole)
    record = json.loads(evaltrack("release-status", "--format", "json", "tool-agent-no-approval").stdout)
    blocks = [r for r in record["reasons"] if r["severity"] == "block"]
    assert blocks and all(r["source"] == "deterministic_suite" for r in blocks)  # nothing from the capability track
    granted = next(str(r["message"]) for r in blocks if "agent.approval-granted" in str(r["message"]))
    assert "(interventions" in granted
    assert any("agent.approval-denied" in str(r["message"]) and "effects" in str(r["message"]) for r in blocks)


_LABELS = st.sampled_from(
    ["model_call", "tool_started:lookup_order", "asked:approval", "answered:approved", "output"]
)
_DECLARED = st.lists(
    st.sampled_from(
        [
            {"contains": "refund"},
            {"tries": 1},
            {"effects": []},
            {"effects": [{"tool": "create_return_ticket"}]},
            {"tool_calls": [{"name": "lookup_order"}]},
            {"event_order": ["model_call", "output"]},
            {"interventions": [{"asked": "approval", "answered": "approved"}]},
            {"output_matches": "ticket"},
            {"review_items": 1},
            {"model_told": "denied"},
        ]
    ),
    min_size=1,
    max_size=6,
    unique_by=lambda a: next(iter(a)),
)


@given(
    declared=_DECLARED,
    agent=st.booleans(),
    output=st.sampled_from(["", "refund ticket", "no"]),
    tries=st.integers(0, 3),
    effects=st.lists(st.sampled_from(["create_return_ticket", "lookup_order"]), max_size=2),
    events=st.lists(_LABELS, max_size=5),
    unscripted=st.lists(
        st.sampled_from(["approval asked, nothing scripted", "answer never reached"]), max_size=2
    ),
    review_items=st.integers(0, 2),
)
def test_a_failed_case_names_at_most_as_many_failed_assertions_as_it_was_held_to(
    declared: list[dict[str, Any]],
    agent: bool,
    output: str,
    tries: int,
    effects: list[str],
    events: list[str],
    unscripted: list[str],
    review_items: int,
) -> None:
    # "6 of 5 assertion(s) failed" was printed when an assertion failed twice over, or an implied
    # one (an unsaid `effects: []`, an unscripted ask) failed beside the declared ones
    assertions = parse_assertions(declared)
    run = CaseRun(
        output=output,
        policy_failures=0,
        tries=tries,
        agent=agent,
        effects=tuple({"tool": t, "id": f"c{i}", "outcome": "ok"} for i, t in enumerate(effects)),
        events=tuple(events),
        review_items=review_items,
        unscripted=tuple(unscripted) if agent else (),
    )
    failed = {line.split(":", 1)[0] for line in failed_assertions(assertions, run)}
    checked = checked_kinds(assertions, run)
    assert failed <= set(checked), (failed, checked)
    assert len(checked) == len(set(checked)) >= len(assertions)

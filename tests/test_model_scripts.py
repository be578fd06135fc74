"""Model scripts (`script/NAME`): the shape, the turn rule, the provider through litellm's real path,
the spend path paying once per try (across processes too), validation at registry collection, and the
scripted case gates."""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eval_assets.config import (
    EngineSettings,
    Project,
    ScriptBook,
    Subject,
    load_script,
    script_problems,
)
from eval_assets.engine import Engine, subject_spec
from eval_assets.gates import CaseError, GateContext, case_outcome, execute_case, load_case, read_registry
from eval_assets.home import PROJECT_ROOT
from eval_assets.providers import ModelScript, NoScriptTurn, select_turn
from eval_assets.providers.gateway import CallSpec, ModelGateway, UnpricedModel
from eval_assets.spend import AttemptRef, SpendPath, open_journal

FAST = EngineSettings(
    concurrency_per_model=4, timeout_s=10, max_tries=3, backoff_base_s=0.0, backoff_max_s=0.0
)
PRICE = (3e-6, 15e-6)


def _script(turns: list[dict[str, Any]]) -> ModelScript:
    return ModelScript.model_validate({"turns": turns})


def _gateway(
    scripts: dict[str, ModelScript], prices: dict[str, tuple[float, float]] | None = None
) -> ModelGateway:
    def source(name: str) -> ModelScript:
        return scripts[name]

    return ModelGateway(
        prices if prices is not None else {f"script/{n}": PRICE for n in scripts}, scripts=source
    )


def _spec(model: str, messages: list[dict[str, Any]] | None = None, try_no: int = 1) -> CallSpec:
    return CallSpec(
        model,
        messages or [{"role": "user", "content": "hello"}],
        256,
        10.0,
        metadata={"build": "b", "scenario_id": "s", "repeat": 1, "try_no": try_no},
    )


# --- the turn rule ------------------------------------------------------------------------------

RETRY_THEN_TOOLS = _script(
    [
        {"error": "RateLimitError", "message": "slow down"},
        {"tool_calls": [{"id": "call_a", "function": {"name": "f", "arguments": "{}"}}]},
        {"error": "InternalServerError"},
        {"error": "ServiceUnavailableError"},
        {"text": "done"},
    ]
)


def test_step_is_the_assistant_turns_so_far_and_try_picks_within_the_step() -> None:
    user = [{"role": "user", "content": "q"}]
    after_one = [*user, {"role": "assistant", "content": None}, {"role": "tool", "content": "r"}]
    assert select_turn(RETRY_THEN_TOOLS, "x", user, 1).error == "RateLimitError"  # type: ignore[union-attr]
    assert select_turn(RETRY_THEN_TOOLS, "x", user, 2).tool_calls[0].id == "call_a"  # type: ignore[union-attr]
    # the next step restarts at try 1: the retry rule per turn is the engine's own
    assert select_turn(RETRY_THEN_TOOLS, "x", after_one, 1).error == "InternalServerError"  # type: ignore[union-attr]
    assert select_turn(RETRY_THEN_TOOLS, "x", after_one, 2).error == "ServiceUnavailableError"  # type: ignore[union-attr]
    assert select_turn(RETRY_THEN_TOOLS, "x", after_one, 3).text == "done"  # type: ignore[union-attr]
    # assistant turns quoted in the input (before the last user message) are not the model's turns
    quoted = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    assert select_turn(RETRY_THEN_TOOLS, "x", quoted, 1).error == "RateLimitError"  # type: ignore[union-attr]


def test_an_exhausted_script_is_an_error_never_a_silent_stop() -> None:
    two_assistant = [{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]
    with pytest.raises(NoScriptTurn, match="2 assistant turn"):
        select_turn(RETRY_THEN_TOOLS, "x", two_assistant, 1)
    with pytest.raises(NoScriptTurn, match="this is try 3"):
        select_turn(RETRY_THEN_TOOLS, "x", [{"role": "user", "content": "q"}], 3)
    trailing = _script([{"text": "a"}, {"error": "Timeout"}])
    assert select_turn(trailing, "x", [{"role": "assistant", "content": "a"}], 1).error == "Timeout"  # type: ignore[union-attr]
    with pytest.raises(NoScriptTurn):
        select_turn(trailing, "x", [{"role": "assistant", "content": "a"}], 2)


# --- the provider, through litellm ---------------------------------------------------------------


def test_text_tool_calls_and_failures_through_litellm() -> None:
    gw = _gateway({"s": RETRY_THEN_TOOLS})
    first = asyncio.run(gw.call(_spec("script/s")))
    assert (first.ok, first.error_kind, first.retryable) == (False, "RateLimitError", True)
    assert "slow down" in (first.error or "")
    second = asyncio.run(gw.call(_spec("script/s", try_no=2)))
    assert second.ok and second.tool_calls == [{"id": "call_a", "name": "f", "arguments": "{}"}]
    assert second.cost_usd == pytest.approx(
        second.prompt_tokens * PRICE[0] + second.completion_tokens * PRICE[1]
    )
    assert second.cost_usd > 0


def test_failure_turn_names_the_byte_it_broke_off_at_and_non_retryable_classes_stay_so() -> None:
    script = _script([{"error": "ContextWindowExceededError", "reply": "héllo world", "break_at": 2}])
    assert script.turns[0].partial() == "h"  # type: ignore[union-attr]  # "é" is bytes 1-2: cut inside it, whole characters only
    out = asyncio.run(_gateway({"s": script}).call(_spec("script/s")))
    assert (out.ok, out.error_kind, out.retryable) == (False, "ContextWindowExceededError", False)
    assert "broke off at byte 2 of 12" in (out.error or "")


def test_exhausted_unknown_and_unpriced_scripts_fail_closed() -> None:
    gw = _gateway({"s": _script([{"text": "only"}])})
    out = asyncio.run(gw.call(_spec("script/s", [{"role": "assistant", "content": "only"}])))
    assert (out.ok, out.error_kind, out.retryable) == (False, "ScriptExhausted", False)
    missing = asyncio.run(gw.call(_spec("script/nope")))
    assert (missing.ok, missing.error_kind) == (False, "ScriptUnavailable")
    no_source = asyncio.run(ModelGateway({"script/s": PRICE}).call(_spec("script/s")))
    assert (no_source.ok, no_source.error_kind) == (False, "ScriptUnavailable")
    # a name no gateway in this process priced (registered prices reach litellm's process-wide map)
    with pytest.raises(UnpricedModel):
        _gateway({"never-priced": _script([{"text": "x"}])}, prices={}).worst_case_cost(
            _spec("script/never-priced")
        )


# --- the spend path: one row per try, each priced; the rule survives a process boundary -----------------


def _subject_spec(project: Project, model: str) -> CallSpec:
    scenario = project.scenarios["support.refund-policy"]
    return subject_spec(
        Subject(model=model, family="script"), scenario, build="b-script", repeat=1, timeout_s=10
    )


def test_retry_after_a_failure_turn_is_paid_once_per_try(project: Project, tmp_path: Path) -> None:
    journal = open_journal(f"sqlite:///{tmp_path / 'j.sqlite'}")
    gateway = ModelGateway(project.settings.price_table(), scripts=ScriptBook(project.root))
    engine = Engine(SpendPath(journal, gateway, run_id="r1"), FAST, jitter=random.Random(0))
    model = "script/refund-retry-then-answer"
    result = asyncio.run(
        engine.call(
            AttemptRef("b-script", "support.refund-policy", 1, "subject"), _subject_spec(project, model)
        )
    )
    assert result.status == "ok" and result.tries == 2 and "within 30 days" in (result.text or "")
    rows = journal.rows(build="b-script")
    assert [(r.try_no, r.status) for r in rows] == [(1, "failed"), (2, "settled")]
    inp, out = gateway.price(model)
    assert all(
        r.reserved_usd > 0 and r.settled_at is not None for r in rows
    )  # each try reserved, priced, settled
    assert rows[0].error is not None and rows[0].error.startswith("[retryable] InternalServerError")
    assert rows[0].cost_usd == 0.0  # a failed call reports no usage: nothing billed for it
    paid = rows[1]
    assert paid.cost_usd == pytest.approx(paid.prompt_tokens * inp + paid.completion_tokens * out)
    assert result.cost_usd == pytest.approx(sum(r.cost_usd or 0.0 for r in rows))


_ONE_RUN = """
import asyncio, json, sys
from pathlib import Path
from eval_assets.config import EngineSettings, ScriptBook, Subject, load_project
from eval_assets.engine import Engine, subject_spec
from eval_assets.providers.gateway import ModelGateway
from eval_assets.spend import AttemptRef, SpendPath, open_journal
project = load_project(Path(sys.argv[1]))
journal = open_journal(sys.argv[2])
gateway = ModelGateway(project.settings.price_table(), scripts=ScriptBook(project.root))
settings = EngineSettings(max_tries=int(sys.argv[3]), backoff_base_s=0.0, backoff_max_s=0.0, timeout_s=10)
engine = Engine(SpendPath(journal, gateway, run_id=sys.argv[4]), settings)
spec = subject_spec(Subject(model="script/refund-retry-then-answer", family="script"),
                    project.scenarios["support.refund-policy"], build="b-proc", repeat=1, timeout_s=10)
r = asyncio.run(engine.call(AttemptRef("b-proc", "support.refund-policy", 1, "subject"), spec))
print(json.dumps([r.status, r.tries, r.error_kind, r.text]))
"""


def test_the_turn_rule_survives_a_process_boundary(tmp_path: Path) -> None:
    """Process 1 makes try 1 (the scripted 503) and stops; process 2 reuses that settled try from the
    journal and makes try 2, which the script answers: nothing in memory carries the position."""
    url = f"sqlite:///{tmp_path / 'j.sqlite'}"
    env = {**os.environ, "LITELLM_OFFLINE_MODE": "true"}

    def run(tries: int, run_id: str) -> list[Any]:
        proc = subprocess.run(
            [sys.executable, "-c", _ONE_RUN, str(PROJECT_ROOT), url, str(tries), run_id],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=True,
        )
        return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    assert run(1, "first")[:3] == ["error", 1, "InternalServerError"]
    status, tries, _, text = run(2, "second")
    assert (status, tries) == ("ok", 2) and "within 30 days" in text
    rows = open_journal(url).rows(build="b-proc")
    assert [(r.try_no, r.status, r.run_id) for r in rows] == [
        (1, "failed", "first"),
        (2, "settled", "second"),
    ]


# --- validation at collection ------------------------------------------------------------------------


def _copy_checkout(tmp_path: Path) -> Path:
    """The checkout at `tmp_path/proj` (no virtualenv, git, home or caches), for a test to change."""
    root = tmp_path / "proj"
    shutil.copytree(
        PROJECT_ROOT,
        root,
        ignore=shutil.ignore_patterns(".venv", ".git", ".eval_home", "__pycache__", ".*cache"),
    )
    return root


def _copy_gates(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(PROJECT_ROOT / "gates", root / "gates")
    return root


def test_invalid_and_missing_scripts_are_registry_problems(tmp_path: Path) -> None:
    root = _copy_gates(tmp_path)
    # a case gate whose case plays the tool-loop script, as a project would register it
    (root / "gates/cases").mkdir(exist_ok=True)
    shutil.copy(PROJECT_ROOT / "tests/cases/scripted-tool-loop.yaml", root / "gates/cases/loop.yaml")
    (root / "gates/loop.yaml").write_text(
        "gates:\n  - id: loop.keeps-call-ids\n    milestone: 1\n    kind: case\n"
        "    declared_in: {document: docs/specs/project.md, heading: Hard gates}\n"
        "    statement: The tool loop keeps its call ids.\n    check: eval_assets.gates.drivers:run_case\n"
        "    case: gates/cases/loop.yaml\n    expect: pass\n"
    )
    (root / "gates/fixtures/models/malformed-verdict.yaml").write_text(
        "turns:\n  - text: ok\n  - error: Teapot\n  - tool_calls: [{id: 'bad id', function: {name: f, arguments: '{}'}}]\n"
    )
    (root / "gates/fixtures/models/tent-warranty-tool-loop.yaml").unlink()
    shown = [str(p) for p in read_registry(root, check_imports=False).problems]
    assert any(
        p.startswith("gates/fixtures/models/malformed-verdict.yaml: turns.1.error.error: Input should be")
        for p in shown
    ), shown
    assert any(
        p.startswith("gates/fixtures/models/malformed-verdict.yaml: turns.2.tool_calls.tool_calls.0.id:")
        for p in shown
    ), shown
    assert any(
        "gates/loop.yaml: gates." in p
        and "subject: no script gates/fixtures/models/tent-warranty-tool-loop.yaml" in p
        for p in shown
    ), shown


def test_the_shipped_scripts_validate(project: Project) -> None:
    assert script_problems(project.root) == []
    script, problems = load_script(project.root, "tent-warranty-tool-loop")
    assert problems == [] and script is not None and len(script.steps()) == 4
    assert load_script(project.root, "../evaltrack")[1][0].field == "name"


def test_validate_reports_a_broken_script(tmp_path: Path) -> None:
    root = _copy_checkout(tmp_path)
    (root / "gates/fixtures/models/refund-retry-then-answer.yaml").write_text(
        "turns:\n  - error: InternalServerError\n    reply: abc\n    break_at: 9\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "eval_assets.cli", "--project", str(root), "validate"],
        capture_output=True,
        text=True,
        env={**os.environ, "EVAL_HOME": str(tmp_path / "home")},
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        "gates/fixtures/models/refund-retry-then-answer.yaml: turns.0.error: break_at 9 is past the reply's 3 bytes"
        in proc.stdout + proc.stderr
    )


# --- the scripted cases (tests/cases/) ----------------------------------------------------------------------------


def _outcome(root: Path, name: str) -> Any:
    case, problems = load_case(root / f"tests/cases/{name}.yaml")
    assert case is not None, problems
    return case_outcome(case, GateContext(root=root, gate_id=name, kind="case", build="b", milestone=3))


@pytest.mark.parametrize(
    "name", ["scripted-retry-then-answer", "scripted-malformed-verdict", "scripted-tool-loop"]
)
def test_scripted_cases_pass(name: str) -> None:
    outcome = _outcome(PROJECT_ROOT, name)
    assert outcome.passed, outcome


def test_scripted_cases_fail_when_the_script_changes(tmp_path: Path) -> None:
    """The cases pin the scripts: other call ids, no retry, or a well-formed verdict each fail them."""
    root = _copy_checkout(tmp_path)
    models = root / "gates/fixtures/models"
    loop = models / "tent-warranty-tool-loop.yaml"
    loop.write_text(loop.read_text().replace("call_policy_tents", "call_policy_other"))
    retry = models / "refund-retry-then-answer.yaml"
    retry.write_text("turns:\n  - text: Refunds are accepted within 30 days.\n")
    (models / "malformed-verdict.yaml").write_text(
        'turns:\n  - text: \'<verdict>{"correctness": 5, "completeness": 5, "clarity": 5}</verdict>\'\n'
    )
    loop_out = _outcome(root, "scripted-tool-loop")
    assert not loop_out.passed and any("call_policy_other" in f for f in loop_out.findings)
    retry_out = _outcome(root, "scripted-retry-then-answer")
    assert not retry_out.passed and any("tries: 2 — found 1" in f for f in retry_out.findings)
    verdict_out = _outcome(root, "scripted-malformed-verdict")
    assert not verdict_out.passed and any("the verdict is scored" in f for f in verdict_out.findings)


def test_a_streamed_failure_turn_delivers_the_bytes_before_its_break_then_raises() -> None:
    import litellm
    from litellm.exceptions import MidStreamFallbackError

    script = _script(
        [{"error": "APIConnectionError", "reply": "Refunds are accepted within 30 days.", "break_at": 19}]
    )
    _gateway({"s": script}).ready()  # registers the providers (and the price) with litellm

    async def stream() -> tuple[str, BaseException | None]:
        got, error = "", None
        try:
            response = await litellm.acompletion(
                model="script/s",
                messages=[{"role": "user", "content": "q"}],
                stream=True,
                metadata={"script": script.model_dump(mode="json"), "try_no": 1},
                num_retries=0,
            )
            async for chunk in response:
                got += chunk.choices[0].delta.content or ""
        except Exception as exc:
            error = exc
        return got, error

    got, error = asyncio.run(stream())
    assert got == "Refunds are accepted"[:19] and len(got.encode()) == 19
    # litellm reports an error after content as a mid-stream failure carrying the provider's exception
    assert isinstance(error, MidStreamFallbackError), error
    assert isinstance(error.original_exception, litellm.APIConnectionError)
    assert "broke off at byte 19 of 36" in str(error.original_exception)


def test_a_build_may_name_a_priced_script_model_without_knobs(project: Project) -> None:
    from eval_assets.config import BuildManifest, validate_build

    def problems(model: str, params: dict[str, Any]) -> list[str]:
        manifest = BuildManifest.model_validate(
            {"id": "b-s", "milestone": 1, "subject": {"model": model, "family": "script", "params": params}}
        )
        return [str(p) for p in validate_build(manifest, project, "b.yaml", [])]

    assert problems("script/refund-retry-then-answer", {}) == []
    assert any(
        "subject.params.skill: unknown script knob" in p
        for p in problems("script/refund-retry-then-answer", {"skill": 1})
    )
    assert any("no price" in p or "price" in p for p in problems("script/not-priced-anywhere", {}))


def test_a_build_on_a_script_subject_pays_each_try_once_in_journal_and_scenario_runs(
    project: Project, home: Any, tmp_path: Path
) -> None:
    """`evaltrack run`'s subject step on script/refund-retry-then-answer: every attempt fails its first
    try (the scripted 503) and answers on its second; the journal holds two rows per attempt, each
    reserved at a priced worst case and settled once, and scenario_runs' cost is their sum."""
    from eval_assets.capability.materialize import materialize_scenario_runs
    from eval_assets.capability.track import Track

    manifest = tmp_path / "scripted.yaml"
    manifest.write_text(
        "id: b-scripted\nmilestone: 1\nsubject: {model: script/refund-retry-then-answer, family: script}\n"
    )
    track = Track(project, home)
    track.register_build(manifest)
    materialize_scenario_runs(track, "b-scripted", "run-1")
    every = track.warehouse.query(
        "SELECT scenario_id, repeat, status, tries, cost_usd, excluded_reason FROM scenario_runs WHERE build = 'b-scripted'"
    )
    # scenarios with their own small ceiling are excluded (a ceiling, never an error); every other
    # attempt (multi-turn inputs and tool scenarios included) answers on its second try
    excluded = every[every["status"] == "excluded"]
    assert all("ceiling" in str(r) for r in excluded["excluded_reason"])
    runs = every[every["status"] != "excluded"]
    assert len(runs) >= 90 and set(runs["status"]) == {"ok"} and set(runs["tries"]) == {2}
    rows = [r for r in track.journal.rows(build="b-scripted", role="subject") if r.status != "refused"]
    by_attempt: dict[tuple[str, int], list[Any]] = {}
    for row in rows:
        by_attempt.setdefault((row.scenario_id, row.repeat), []).append(row)
    inp, out = track.gateway.price("script/refund-retry-then-answer")
    for run in runs.itertuples():
        tries = sorted(by_attempt.pop((run.scenario_id, run.repeat)), key=lambda r: r.try_no)
        assert [(r.try_no, r.status) for r in tries] == [(1, "failed"), (2, "settled")]
        assert all(r.reserved_usd > 0 and r.settled_at is not None for r in tries)
        assert tries[1].cost_usd == pytest.approx(
            tries[1].prompt_tokens * inp + tries[1].completion_tokens * out
        )
        assert run.cost_usd == pytest.approx(sum(r.cost_usd or 0.0 for r in tries))


def test_a_tool_loop_failing_on_its_second_turn_counts_that_turns_tries_not_every_call(
    tmp_path: Path,
) -> None:
    """The fixtures command's "failed after N try(s)": N is the failing call's tries (its retries);
    calls of earlier turns are named apart."""
    root = _copy_checkout(tmp_path)
    (root / "gates/fixtures/models/tool-then-fail.yaml").write_text(
        "description: one tool call, then a provider that fails every try\n"
        "turns:\n"
        "  - tool_calls:\n"
        "      - id: call_lookup\n"
        "        type: function\n"
        '        function: {name: lookup_order, arguments: \'{"order_number": "NW-51877"}\'}\n'
        "  - error: InternalServerError\n"
        "  - error: InternalServerError\n"
    )
    (root / "gates/cases").mkdir(exist_ok=True)
    (root / "gates/cases/tool-then-fail.yaml").write_text(
        "id: tool-then-fail\ndescription: the second turn fails both of its tries\n"
        "scenario: converted.support-728838cd92b1\nmodel_fixture: tool-then-fail\nbuild: gates-scripted\n"
        "tries: 2\nassertions:\n  - replay_misses: 0\n"
    )
    settings = root / "evaltrack.yaml"
    settings.write_text(
        settings.read_text().replace(
            "  script/tent-warranty-tool-loop:",
            "  script/tool-then-fail: {input_per_mtok: 1.0, output_per_mtok: 2.0}\n  script/tent-warranty-tool-loop:",
            1,
        )
    )
    case, problems = load_case(root / "gates/cases/tool-then-fail.yaml")
    assert case is not None, problems
    with pytest.raises(
        CaseError, match=r"failed after 2 try\(s\) \(3 calls over 2 turns\): InternalServerError"
    ):
        execute_case(
            case, GateContext(root=root, gate_id="tool-then-fail", kind="case", build="b", milestone=3)
        )

"""OpenTelemetry spans: one small build (subject, judge, decision) under the SDK's in-memory exporter.

The SDK's provider can be set as the global one only once per process, so the build runs in a child
process that installs it, runs the track, and prints every finished span as JSON; the test checks the
tree (parents, names, attributes) and that the planted canary key is in no attribute. Run with -s to
see the tree.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from eval_assets.home import PROJECT_ROOT
from eval_assets.tracing import ATTRIBUTES, allowed

CHILD = r"""
import dataclasses, json, sys
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

from eval_assets.capability.track import Track
from eval_assets.config import load_project
from eval_assets.home import EvalHome, PROJECT_ROOT
from eval_assets.release import write_release_decision
from eval_assets.capability.materialize import materialize_judge_verdicts, materialize_scenario_runs

tmp = Path(sys.argv[1])
project = load_project(PROJECT_ROOT)
judge = project.active_judges[0]
scenario = project.scenarios_judged_by(judge)[0].model_copy(update={"repeats": 2})
engine = project.settings.engine.model_copy(update={"backoff_base_s": 0.0, "backoff_max_s": 0.0, "workers": 1})
project = dataclasses.replace(
    project,
    scenarios={scenario.id: scenario},
    settings=project.settings.model_copy(update={"engine": engine}),
)
track = Track(project, EvalHome(tmp / "home"))
for build, knobs in (("traced-build", "skill: 0.7, seed: 1"), ("failing-build", "error_rate: 1.0, seed: 1")):
    manifest = tmp / f"{build}.yaml"
    manifest.write_text(
        f"id: {build}\nmilestone: 0\nsubject: {{model: sim/agent, family: sim, params: {{{knobs}}}}}\n"
    )
    track.register_build(manifest)
materialize_scenario_runs(track, "traced-build", "run-subject")
materialize_judge_verdicts(track, "traced-build", judge.version_id, "run-judge")
write_release_decision(track, "traced-build", "run-decision")
materialize_scenario_runs(track, "failing-build", "run-failing")
track.journal.close()
spans = [
    {
        "name": s.name,
        "id": s.context.span_id,
        "trace": s.context.trace_id,
        "parent": s.parent.span_id if s.parent is not None else None,
        "attributes": {k: list(v) if isinstance(v, tuple) else v for k, v in (s.attributes or {}).items()},
        "scope": s.instrumentation_scope.name,
        "kind": s.kind.name,
        "status": s.status.status_code.name,
        "description": s.status.description,
    }
    for s in exporter.get_finished_spans()
]
rubric = project.rubric_for(judge).key
print(json.dumps({
    "judge": judge.version_id, "judge_model": judge.model, "rubric": rubric, "scenario": scenario.id,
    "max_tries": engine.max_tries, "spans": spans,
}))
"""


def _run_child(tmp_path: Path, key: str) -> dict[str, Any]:
    env = {**os.environ, "OPENAI_API_KEY": key, "LITELLM_OFFLINE_MODE": "true", "EVAL_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=PROJECT_ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert key not in done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _tree(spans: list[dict[str, Any]]) -> str:
    children: dict[int | None, list[dict[str, Any]]] = {}
    for s in spans:
        children.setdefault(s["parent"], []).append(s)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for s in sorted(children.get(parent, []), key=lambda s: json.dumps(s["attributes"], sort_keys=True)):
            attrs = " ".join(f"{k}={v}" for k, v in sorted(s["attributes"].items()))
            lines.append(f"{'  ' * depth}{s['name']}  {attrs}")
            walk(s["id"], depth + 1)

    walk(None, 0)
    return "\n".join(lines)


def test_one_small_build_emits_the_span_tree_with_its_attributes_and_no_key(tmp_path: Path) -> None:
    key = f"sk-canary-{secrets.token_hex(16)}"
    out = _run_child(tmp_path, key)
    spans, judge, scenario = out["spans"], out["judge"], out["scenario"]
    print("\nspan tree (InMemorySpanExporter):\n" + _tree(spans))

    assert {s["scope"] for s in spans} == {"eval-track"}
    by_id = {s["id"]: s for s in spans}
    ok_build = [s for s in spans if s["attributes"].get("eval.build") == "traced-build"]
    subject_chat, judge_chat = "chat sim/agent", f"chat {out['judge_model']}"
    names = Counter(s["name"] for s in ok_build)
    # judged ahead under the subject run (paid, model-call spans only), then read back under the judge
    # run: one eval.judge span per verdict (reused), each with its reused call
    assert names == {
        "eval.run": 2,
        "eval.attempt": 2,
        subject_chat: 2,
        judge_chat: 4,
        "eval.judge": 2,
        "eval.decision": 1,
    }
    roots = [s for s in ok_build if s["parent"] is None]
    assert sorted(s["name"] for s in roots) == ["eval.decision", "eval.run", "eval.run"]
    subject_run = next(s for s in roots if s["attributes"].get("eval.asset") == "scenario_runs")
    judge_run = next(s for s in roots if s["attributes"].get("eval.asset") == "judge_verdicts")
    assert subject_run["attributes"] == {
        "eval.asset": "scenario_runs",
        "eval.build": "traced-build",
        "eval.dagster_run_id": "run-subject",
    }
    assert judge_run["attributes"] == {
        "eval.asset": "judge_verdicts",
        "eval.build": "traced-build",
        "eval.judge": judge,
        "eval.dagster_run_id": "run-judge",
    }
    for s in ok_build:
        a = s["attributes"]
        if s["name"] == "eval.attempt":
            assert by_id[s["parent"]] is subject_run and s["trace"] == subject_run["trace"]
            assert (a["eval.scenario"], a["eval.status"], a["eval.reused"]) == (scenario, "ok", False)
            assert a["eval.cost_usd"] > 0 and s["status"] == "UNSET"
        if s["name"] == "eval.judge":
            assert by_id[s["parent"]] is judge_run
            assert (a["eval.judge"], a["eval.scenario"], a["eval.score.source"]) == (judge, scenario, "model")
            assert a["eval.status"] == "scored" and 0.0 <= a["eval.score.value"] <= 1.0
            assert a["eval.rubric"] == out["rubric"] and a["eval.reused"] is True
        if s["name"].startswith("chat "):
            parent = by_id[s["parent"]]
            assert s["kind"] == "CLIENT" and s["status"] == "UNSET"
            assert a["gen_ai.operation.name"] == "chat" and s["name"] == f"chat {a['gen_ai.request.model']}"
            assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
            assert a["eval.cost_usd"] > 0 and a["eval.try"] == 1
            assert a["eval.attempt_key"] == (
                f"traced-build/{a.get('eval.judge', '-')}/{scenario}/{a['eval.repeat']}/{a['eval.role']}/1"
            )
            if parent["name"] == "eval.attempt":  # the subject's call, paid now
                assert a["eval.role"] == "subject" and a["eval.paid"] is True
                assert a["eval.repeat"] == parent["attributes"]["eval.repeat"]
                assert a["gen_ai.response.finish_reasons"] == ["stop"]
                assert a["eval.dagster_run_id"] == "run-subject"
            elif parent is subject_run:  # a judge call made ahead: paid under the subject run
                assert (a["eval.role"], a["eval.judge"], a["eval.paid"]) == ("judge", judge, True)
                assert a["eval.dagster_run_id"] == "run-subject"
            else:  # the verdict's call under the judge run: read back, not paid again
                assert parent["name"] == "eval.judge" and by_id[parent["parent"]] is judge_run
                assert (a["eval.paid"], a["eval.reused"]) == (False, True)
                assert "gen_ai.response.finish_reasons" not in a
                assert a["eval.dagster_run_id"] == "run-judge"
    assert sorted(s["attributes"]["eval.repeat"] for s in ok_build if s["name"] == "eval.attempt") == [1, 2]
    paid_judge = [s for s in ok_build if s["name"] == judge_chat and s["attributes"]["eval.paid"]]
    reused_judge = [s for s in ok_build if s["name"] == judge_chat and not s["attributes"]["eval.paid"]]
    assert [
        s["attributes"]["eval.cost_usd"]
        for s in sorted(paid_judge, key=lambda s: s["attributes"]["eval.repeat"])
    ] == [
        s["attributes"]["eval.cost_usd"]
        for s in sorted(reused_judge, key=lambda s: s["attributes"]["eval.repeat"])
    ]
    [decision] = [s for s in spans if s["name"] == "eval.decision"]
    assert decision["attributes"]["eval.build"] == "traced-build"
    assert decision["attributes"]["eval.decision"] in {"allow", "block", "none", "investigate"}

    # a subject whose every try fails: each try's span and the attempt's end ERROR with the error's kind
    failing = [s for s in spans if s["attributes"].get("eval.build") == "failing-build"]
    attempts = [s for s in failing if s["name"] == "eval.attempt"]
    calls = [s for s in failing if s["name"] == subject_chat]
    assert len(attempts) == 2 and len(calls) == 2 * out["max_tries"]
    for s in attempts + calls:
        assert s["status"] == "ERROR" and s["description"] == "InternalServerError", s
        assert s["attributes"]["error.type"] == "InternalServerError"
    assert sorted(s["attributes"]["eval.try"] for s in calls) == sorted(
        list(range(1, out["max_tries"] + 1)) * 2
    )
    assert {s["attributes"]["eval.paid"] for s in calls} == {True}

    for s in spans:  # only the declared attributes; no key anywhere
        assert set(s["attributes"]) <= ATTRIBUTES, s
        assert key not in json.dumps(s), s


def test_an_attribute_outside_the_declared_set_is_refused() -> None:
    with pytest.raises(ValueError, match="eval.output"):
        allowed({"eval.build": "b", "eval.output": "text"})
    assert allowed({"eval.build": "b", "eval.score.value": None}) == {"eval.build": "b"}

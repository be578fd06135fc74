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
from eval_assets.release import run_release_decision

tmp = Path(sys.argv[1])
project = load_project(PROJECT_ROOT)
judge = project.active_judges[0]
scenario = project.scenarios_for(judge)[0].model_copy(update={"repeats": 2})
project = dataclasses.replace(project, scenarios={scenario.id: scenario})
manifest = tmp / "b.yaml"
manifest.write_text(
    "id: traced-build\nmilestone: 0\nsubject: {model: sim/agent, family: sim, params: {skill: 0.7, seed: 1}}\n"
)
track = Track(project, EvalHome(tmp / "home"))
track.register_build(manifest)
track.run_scenario_runs("traced-build", "run-subject")
track.run_judge_verdicts("traced-build", judge.version_id, "run-judge")
run_release_decision(track, "traced-build", "run-decision")
track.journal.close()
spans = [
    {
        "name": s.name,
        "id": s.context.span_id,
        "trace": s.context.trace_id,
        "parent": s.parent.span_id if s.parent is not None else None,
        "attributes": dict(s.attributes or {}),
        "scope": s.instrumentation_scope.name,
    }
    for s in exporter.get_finished_spans()
]
rubric = project.rubric_for(judge).key
print(json.dumps({"judge": judge.version_id, "rubric": rubric, "scenario": scenario.id, "spans": spans}))
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
    names = Counter(s["name"] for s in spans)
    assert names == {"eval.run": 2, "eval.attempt": 2, "eval.judge": 2, "eval.decision": 1}
    roots = [s for s in spans if s["parent"] is None]
    assert sorted(s["name"] for s in roots) == ["eval.decision", "eval.run", "eval.run"]
    subject_run = next(s for s in roots if s["attributes"].get("eval.asset") == "scenario_runs")
    judge_run = next(s for s in roots if s["attributes"].get("eval.asset") == "judge_verdicts")
    assert subject_run["attributes"] == {"eval.asset": "scenario_runs", "eval.build": "traced-build"}
    assert judge_run["attributes"] == {
        "eval.asset": "judge_verdicts",
        "eval.build": "traced-build",
        "eval.judge": judge,
    }
    for s in spans:
        if s["name"] == "eval.attempt":
            assert by_id[s["parent"]] is subject_run and s["trace"] == subject_run["trace"]
            assert s["attributes"]["eval.build"] == "traced-build"
            assert s["attributes"]["eval.scenario"] == scenario
            assert s["attributes"]["eval.status"] == "ok"
        if s["name"] == "eval.judge":
            assert by_id[s["parent"]] is judge_run
            a = s["attributes"]
            assert (a["eval.judge"], a["eval.scenario"], a["eval.score.source"]) == (judge, scenario, "model")
            assert a["eval.status"] == "scored" and 0.0 <= a["eval.score.value"] <= 1.0
            assert a["eval.rubric"] == out["rubric"]
    assert sorted(s["attributes"]["eval.repeat"] for s in spans if s["name"] == "eval.attempt") == [1, 2]
    assert sorted(s["attributes"]["eval.repeat"] for s in spans if s["name"] == "eval.judge") == [1, 2]
    [decision] = [s for s in spans if s["name"] == "eval.decision"]
    assert decision["attributes"]["eval.build"] == "traced-build"
    assert decision["attributes"]["eval.decision"] in {"allow", "block", "none", "investigate"}
    for s in spans:  # only the declared attributes; no cost, no key anywhere
        assert set(s["attributes"]) <= ATTRIBUTES, s
        assert not any("cost" in k for k in s["attributes"])
        assert key not in json.dumps(s), s


def test_an_attribute_outside_the_declared_set_is_refused() -> None:
    with pytest.raises(ValueError, match="eval.cost_usd"):
        allowed({"eval.build": "b", "eval.cost_usd": 0.1})
    assert allowed({"eval.build": "b", "eval.score.value": None}) == {"eval.build": "b"}

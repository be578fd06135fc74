"""The run engine over the real litellm path (sim provider) and a real SQLite journal."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from eval_assets.config import BuildManifest, EngineSettings, Project
from eval_assets.engine import Engine, StoredAttempt
from eval_assets.providers.gateway import CallOutcome, CallSpec, ModelGateway, UnpricedModel
from eval_assets.spend import SpendPath, open_journal

FAST = EngineSettings(concurrency_per_model=8, timeout_s=5, max_tries=3, backoff_base_s=0.001, backoff_max_s=0.005)


def _build(**params: Any) -> BuildManifest:
    return BuildManifest.model_validate(
        {
            "id": "b-test",
            "milestone": 1,
            "subject": {"model": "sim/agent", "family": "sim", "params": {"skill": 0.7, "seed": 1, **params}},
        }
    )


def _gateway(project: Project) -> ModelGateway:
    return ModelGateway({m: (p.input_per_mtok / 1e6, p.output_per_mtok / 1e6) for m, p in project.settings.prices.items()})


def _engine(project: Project, path: Path, gateway: ModelGateway | None = None, settings: EngineSettings = FAST) -> Engine:
    journal = open_journal(f"sqlite:///{path}")
    spend = SpendPath(journal, gateway or _gateway(project), run_id="r1")
    return Engine(spend=spend, settings=settings, jitter=random.Random(0))


def _scenarios(project: Project, n: int = 4) -> list:
    return [s for _, s in sorted(project.scenarios.items())][:n]


def test_same_seed_build_scenario_repeat_gives_same_output_and_keys(project: Project, tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):
        engine = _engine(project, tmp_path / f"{name}.sqlite")
        results = asyncio.run(engine.run_subjects(_build(), _scenarios(project)))
        keys = [r.attempt_key for r in engine.spend.journal.rows()]
        runs.append(([(r.scenario.id, r.repeat, r.call.text) for r in results], keys))
    assert runs[0] == runs[1]
    assert len(set(runs[0][1])) == len(runs[0][1]) > 0


def test_other_seed_gives_other_outputs(project: Project, tmp_path: Path) -> None:
    a = asyncio.run(_engine(project, tmp_path / "a.sqlite").run_subjects(_build(seed=1), _scenarios(project)))
    b = asyncio.run(_engine(project, tmp_path / "b.sqlite").run_subjects(_build(seed=2), _scenarios(project)))
    assert [(r.scenario.id, r.repeat) for r in a] == [(r.scenario.id, r.repeat) for r in b] and a
    same = [(x.scenario.id, x.repeat) for x, y in zip(a, b, strict=True) if x.call.text == y.call.text]
    assert same == []  # every attempt's output changes with the seed, not just one of them


def test_provider_error_is_an_error_attempt_after_bounded_retries_never_a_score(project: Project, tmp_path: Path) -> None:
    engine = _engine(project, tmp_path / "j.sqlite")
    build = _build(error_rate=1.0)
    scenarios = _scenarios(project, 2)
    results = asyncio.run(engine.run_subjects(build, scenarios))
    assert {r.call.status for r in results} == {"error"}
    assert {r.call.tries for r in results} == {FAST.max_tries}
    assert all("injected provider error" in (r.call.error or "") for r in results)
    judge = project.judges[f"{scenarios[0].judge}-v1"]
    stored = [StoredAttempt(r.scenario.id, r.repeat, r.call.status, r.call.text, 0, None, r.call.error) for r in results]
    verdicts = asyncio.run(
        engine.judge_attempts(build, judge, project.rubric_for(judge), {s.id: s for s in scenarios}, stored)
    )
    assert verdicts and all(v.status == "failed" and v.verdict is None for v in verdicts)
    assert all((v.failure_reason or "").startswith("subject attempt errored") for v in verdicts)
    # every try was journaled with its own key, and all failed
    rows = engine.spend.journal.rows(role="subject")
    assert len(rows) == len(results) * FAST.max_tries and {r.status for r in rows} == {"failed"}


def test_non_retryable_error_is_not_retried(project: Project, tmp_path: Path) -> None:
    engine = _engine(project, tmp_path / "j.sqlite")
    results = asyncio.run(engine.run_subjects(_build(not_a_knob=1), _scenarios(project, 1)))
    assert {(r.call.status, r.call.tries, r.call.error_kind) for r in results} == {("error", 1, "BadRequestError")}


def test_unpriced_model_is_refused_before_any_call(project: Project, tmp_path: Path) -> None:
    engine = _engine(project, tmp_path / "j.sqlite")
    with pytest.raises(UnpricedModel, match="sim/unpriced"):
        engine.spend.preflight(["sim/unpriced"])
    assert engine.spend.journal.rows() == []


class _InFlight(ModelGateway):
    """The real gateway, counting calls in flight per role (a spy: every call still goes to litellm)."""

    def __init__(self, prices: dict) -> None:
        super().__init__(prices)
        self.now: dict[str, int] = {"subject": 0, "judge": 0}
        self.peak: dict[str, int] = {"subject": 0, "judge": 0}
        self.events: list[tuple[str, str]] = []

    async def call(self, spec: CallSpec) -> CallOutcome:
        role = str(spec.metadata["role"])
        self.events.append(("start", role))
        self.now[role] += 1
        self.peak[role] = max(self.peak[role], self.now[role])
        try:
            return await super().call(spec)
        finally:
            self.now[role] -= 1
            self.events.append(("end", role))


def test_judging_is_pipelined_and_concurrency_is_bounded_per_model(project: Project, tmp_path: Path) -> None:
    gateway = _InFlight(dict(_gateway(project)._prices))
    settings = FAST.model_copy(update={"concurrency_per_model": 3})
    engine = _engine(project, tmp_path / "j.sqlite", gateway, settings)
    judges = [(j, project.rubric_for(j)) for j in project.active_judges]
    subjects, verdicts = asyncio.run(
        engine.run_and_judge(_build(latency_ms=20, error_rate=0.0), _scenarios(project, 6), judges)
    )
    assert gateway.peak["subject"] == 3  # bounded, and actually reached
    first_judge_start = gateway.events.index(("start", "judge"))
    last_subject_end = len(gateway.events) - 1 - gateway.events[::-1].index(("end", "subject"))
    assert first_judge_start < last_subject_end  # a judge started while subjects were still running
    assert sum(len(v) for v in verdicts.values()) == len(subjects)

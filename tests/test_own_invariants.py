"""Eval-track's own invariants, as ordinary tests of this repository (never gates of a build).

The import graph, merge-conflict markers, no secret checked in, the registry against the specs, the
verdict parser, the fence, the sim provider, the statistics the decision rests on, the loader's
bad-input corpus and the engine's scripted cases: each check runs here on the repository itself.
Their tests with planted violations are in test_architecture_gates.py, test_secret_gates.py and
fail_closed/test_secrets.py; these names are the former gate ids, so a finding reads the same.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from invariants import architecture, judging, security, statistics, suite
from invariants.bad_config import bad_config_fails_as_expected
from invariants.dagster_canary import dagster_canary_hook

from eval_assets.gates import GateContext, Outcome, case_outcome, drivers, load_case
from eval_assets.home import PROJECT_ROOT

ROOT = PROJECT_ROOT
CASES = ROOT / "tests" / "cases"


def context(gate_id: str, kind: str = "structural", **fields: object) -> GateContext:
    return GateContext(root=ROOT, gate_id=gate_id, kind=kind, build=None, milestone=0, **fields)  # type: ignore[arg-type]


STRUCTURAL: dict[str, Callable[[GateContext], Outcome | None]] = {
    "arch.domain-never-imports-dagster": architecture.domain_never_imports_dagster,
    "arch.one-partition-writer": architecture.one_partition_writer,
    "arch.no-merge-conflict-markers": architecture.no_merge_conflict_markers,
    "arch.assets-have-descriptions": architecture.assets_have_descriptions,
    "arch.import-graph": architecture.import_graph,
    "security.no-secret-checked-in": security.no_secret_checked_in,
    "suite.registry-matches-specs": suite.registry_matches_specs,
    "suite.sim-provider-is-deterministic": suite.sim_provider_is_deterministic,
}


@pytest.mark.parametrize("check_id", sorted(STRUCTURAL))
def test_the_repository_passes(check_id: str) -> None:
    outcome = STRUCTURAL[check_id](context(check_id))
    assert outcome is None or outcome.passed, (outcome.message, outcome.findings)


PROPERTIES = {  # (generator, predicate, trials)
    "judging.verdict-parser-stays-in-bounds": (judging.verdict_replies, judging.verdict_stays_in_bounds, 300),
    "judging.fence-has-one-pair": (judging.fence_inputs, judging.fence_has_one_pair, 300),
    "stats.noise-band-ignores-row-order": (statistics.shuffled_verdicts, statistics.band_ignores_row_order, 100),
    "stats.failed-check-blocks-release": (statistics.check_suites, statistics.failed_check_blocks, 200),
}


@pytest.mark.parametrize("check_id", sorted(PROPERTIES))
def test_the_property_holds(check_id: str) -> None:
    generator, predicate, trials = PROPERTIES[check_id]
    ctx = context(check_id, "property", generator=generator, predicate=predicate, min_trials=trials)
    outcome = drivers.for_all(ctx)
    assert outcome.passed, (outcome.message, outcome.findings)
    assert outcome.trials == trials


def test_config_bad_config_refused_every_case_of_the_corpus() -> None:
    members = sorted(p for p in (ROOT / "tests" / "bad_config").glob("[!_]*/") if p.is_dir())
    assert len(members) >= 37  # the shipped count: deleting a case fails
    findings = {m.name: bad_config_fails_as_expected(m) for m in members}
    assert {name: f for name, f in findings.items() if f} == {}


def test_judging_malformed_verdicts_fail_closed_under_every_rubric() -> None:
    members = tuple(sorted((ROOT / "tests" / "verdict_corpus").glob("*.yaml")))
    assert len(members) >= 3  # one file per shipped rubric, plus the rubric-independent one
    ctx = context("judging.malformed-verdicts-fail-closed", "corpus", members=members, procedure=judging.malformed_verdict_fails_closed)
    outcome = drivers.each_member(ctx)
    assert outcome.passed, (outcome.message, outcome.findings)


# the engine's scripted cases (sim provider, verdict parser, policy check, retries, replay)
@pytest.mark.parametrize("case_file", sorted(p.name for p in CASES.glob("*.yaml")))
def test_the_case_holds(case_file: str) -> None:
    case, problems = load_case(CASES / case_file)
    assert case is not None, problems
    outcome = case_outcome(case, context(case_file, "case", case_path=CASES / case_file))
    assert outcome.passed, (outcome.message, outcome.findings)


def test_the_engine_cases_are_all_here() -> None:
    assert sorted(p.stem for p in CASES.glob("*.yaml")) == [
        "canned-sim-verdict",
        "planted-key-is-a-policy-failure",
        "scripted-malformed-verdict",
        "scripted-retry-then-answer",
        "scripted-tool-loop",
    ]


@pytest.mark.e2e  # a whole materialization through Dagster: the e2e lane (CI), as the no-network run was
def test_security_no_api_key_in_dagster_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """The canary through Dagster: every event and run record of the instance is scanned for the key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    ctx = context("security.no-api-key-in-dagster-events", hooks={security.DAGSTER_HOOK: dagster_canary_hook(ROOT)})
    outcome = security.no_api_key_in_dagster_events(ctx)
    assert outcome.passed, (outcome.message, outcome.findings)


def test_the_dagster_canary_without_its_hook_fails() -> None:
    outcome = security.no_api_key_in_dagster_events(context("security.no-api-key-in-dagster-events"))
    assert not outcome.passed and "no canary.dagster_run hook" in outcome.message


def test_the_product_package_holds_no_check_of_this_repository() -> None:
    """The checks above live under tests/: the product runs none of them for a build."""
    package = ROOT / "eval_assets"
    moved = ("architecture.py", "security.py", "judging.py", "statistics.py", "suite.py", "tests.py", "_ast.py")
    assert [p.name for p in (package / "gates" / "project_checks").iterdir() if p.name in moved] == []
    registry_text = "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "gates").glob("*.yaml")))
    assert not [gate_id for gate_id in [*STRUCTURAL, *PROPERTIES] if gate_id in registry_text]

"""Statistical acceptance of capability reports and release decisions (docs/methods.md, issue 3).

Simulation. Scores are drawn from the sim provider's own model, `subject_quality` (quality =
clip(skill + noise * N(0, 1), 0, 1), seeded by (seed, build, scenario, repeat)), called per attempt
in Python — ~13 µs a draw, ~1M draws for this module — with a noiseless judge (score = quality).
Suite: 200 scenarios x 5 repeats, noise 0.15, scenario skills drawn once per seed from
`numpy.random.default_rng(seed).uniform(0.75, 0.9)`, rubric floor 0.15. Every seed is fixed.

Why this skill range and floor. The floor rule blocks when any of a candidate's repeats falls below
the floor in a scenario where none of the baseline's did. With Gaussian noise, a scenario z noise-sds
above the floor crosses in a repeat with probability Phi(-z); over 200 scenarios x 5 repeats the rule
blocks unchanged builds unless the weakest scenario sits about 4 sd above the floor. Skills >= 0.75
with floor 0.15 do that (A/A floor blocks ~0.5% of pairs). With skills U(0.4, 0.9) and floor 0.2
(1.3 sd) the rule blocked every one of 500 simulated A/A pairs: a floor that healthy scenarios reach
by noise alone is not a floor, and no test threshold can make that rule meaningful.

Effects are set on the expected (clipped) score, not on the skill: clipping at 1 absorbs part of a
skill change, so the skill shift is solved so that the expected suite mean moves by exactly the
stated amount.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

from eval_assets.providers.simmodel import subject_quality
from eval_assets.stats import CapabilityReport, compare, decide, noise_band

N_SCENARIOS = 200
REPEATS = 5
NOISE = 0.15
SKILL_RANGE = (0.75, 0.9)
FLOOR = 0.15
SCENARIO_IDS = [f"scn-{i:03d}" for i in range(N_SCENARIOS)]


def skills_for(seed: int) -> np.ndarray:
    """Scenario skills, drawn once per seed."""
    return np.random.default_rng(seed).uniform(*SKILL_RANGE, N_SCENARIOS)


def draw_build(seed: int, build: str, skills: np.ndarray) -> pd.DataFrame:
    """One build's verdicts: every (scenario, repeat) scored by the sim model's quality."""
    rows = [
        (
            sid,
            repeat,
            subject_quality(
                seed=seed, build=build, scenario_id=sid, repeat=repeat, skill=float(skill), noise=NOISE
            ),
        )
        for sid, skill in zip(SCENARIO_IDS, skills, strict=True)
        for repeat in range(REPEATS)
    ]
    frame = pd.DataFrame(rows, columns=["scenario_id", "repeat", "score"])
    return frame.assign(status="scored", policy_failures=0)


def expected_score(skill: np.ndarray) -> np.ndarray:
    """E[clip(skill + NOISE * Z, 0, 1)] for Z ~ N(0, 1)."""
    low, high = (0.0 - skill) / NOISE, (1.0 - skill) / NOISE
    inside = skill * (stats.norm.cdf(high) - stats.norm.cdf(low)) + NOISE * (
        stats.norm.pdf(low) - stats.norm.pdf(high)
    )
    return inside + stats.norm.sf(high)


def uniformly_dropped(skills: np.ndarray, drop: float) -> np.ndarray:
    """Skills shifted so the expected suite mean falls by exactly `drop`."""
    target = expected_score(skills).mean() - drop
    shift = optimize.brentq(lambda s: expected_score(skills - s).mean() - target, 0.0, 0.5)
    return skills - shift


def concentrated_drop(skills: np.ndarray, share: float = 0.10, drop: float = 0.2) -> np.ndarray:
    """The first `share` of scenarios lose `drop` of skill; the rest gain just enough that the
    expected suite mean is unchanged."""
    hit = int(round(share * len(skills)))
    target = expected_score(skills).mean()

    def moved(gain: float) -> np.ndarray:
        return np.concatenate([skills[:hit] - drop, skills[hit:] + gain])

    gain = optimize.brentq(lambda g: expected_score(moved(g)).mean() - target, 0.0, 0.5)
    return moved(gain)


def report(baseline: pd.DataFrame, candidate: pd.DataFrame) -> CapabilityReport:
    return compare(
        baseline,
        candidate,
        FLOOR,
        judge_version="sim-judge-v1",
        baseline_build="base",
        candidate_build="cand",
        aa_replications=0,  # the report's own A/A simulation is not what these rates measure
    )


def rate(reports: list[CapabilityReport], predicate: Callable[[CapabilityReport], bool]) -> float:
    return float(np.mean([predicate(r) for r in reports]))


def blocked(r: CapabilityReport) -> bool:
    return decide([r]).decision == "block"


@dataclass(frozen=True)
class Pair:
    baseline: pd.DataFrame
    candidate: pd.DataFrame


@pytest.fixture(scope="module")
def aa_pairs() -> list[Pair]:
    """200 A/A pairs: the same skills, the same build, two different seeds."""
    pairs = []
    for pair in range(200):
        skills = skills_for(10_000 + pair)
        pairs.append(Pair(draw_build(2 * pair, "aa", skills), draw_build(2 * pair + 1, "aa", skills)))
    return pairs


@pytest.fixture(scope="module")
def aa_reports(aa_pairs: list[Pair]) -> list[CapabilityReport]:
    return [report(p.baseline, p.candidate) for p in aa_pairs]


@pytest.fixture(scope="module")
def drop_baselines() -> list[tuple[int, np.ndarray, pd.DataFrame, float]]:
    """60 seeds: (seed, skills, baseline verdicts, baseline's suite noise band half-width)."""
    out = []
    for seed in range(500, 560):
        skills = skills_for(seed)
        baseline = draw_build(seed, "base", skills)
        half_width = noise_band(baseline).half_width
        assert half_width is not None
        out.append((seed, skills, baseline, half_width))
    return out


def uniform_drop_reports(
    baselines: list[tuple[int, np.ndarray, pd.DataFrame, float]], bands: float
) -> list[CapabilityReport]:
    return [
        report(baseline, draw_build(seed, "cand", uniformly_dropped(skills, bands * half_width)))
        for seed, skills, baseline, half_width in baselines
    ]


def test_aa_blocks_at_most_five_percent_of_pairs(aa_reports: list[CapabilityReport]) -> None:
    assert len(aa_reports) == 200
    assert rate(aa_reports, blocked) <= 0.05


def test_aa_mean_drop_p_values_are_uniform(aa_reports: list[CapabilityReport]) -> None:
    p_values = [next(f.p_value for f in r.findings if f.finding == "mean_drop") for r in aa_reports]
    assert all(p is not None for p in p_values)
    assert stats.kstest(p_values, "uniform").pvalue > 0.01


def test_any_candidate_policy_failure_blocks_every_time(aa_pairs: list[Pair]) -> None:
    rng = np.random.default_rng(7)
    for pair in aa_pairs[:50]:
        candidate = pair.candidate.copy()
        candidate.loc[rng.integers(len(candidate)), "policy_failures"] = 1
        r = report(pair.baseline, candidate)
        decision = decide([r])
        assert decision.decision == "block"
        assert decision.reasons[0].finding == "policy_failures"


def test_one_collapsed_scenario_blocks_every_time_and_is_named() -> None:
    for seed in range(900, 950):
        skills = skills_for(seed)
        skills[0] = 0.8
        collapsed = skills.copy()
        collapsed[0] = 0.0
        r = report(draw_build(seed, "base", skills), draw_build(seed, "cand", collapsed))
        decision = decide([r])
        assert decision.decision == "block"
        assert any(
            SCENARIO_IDS[0] in reason.scenario_ids
            for reason in decision.reasons
            if reason.severity == "block"
        )


def test_uniform_drop_of_three_noise_bands_blocks_at_least_90_percent_of_seeds(drop_baselines: list) -> None:
    assert rate(uniform_drop_reports(drop_baselines, 3.0), blocked) >= 0.90


def test_uniform_drop_of_half_a_noise_band_blocks_at_most_10_percent_of_seeds(drop_baselines: list) -> None:
    assert rate(uniform_drop_reports(drop_baselines, 0.5), blocked) <= 0.10


def test_concentrated_drop_with_unchanged_mean_is_blocked_in_at_least_95_percent_of_seeds() -> None:
    """20% of 200 scenarios drop 0.25 while the rest rise so that the mean is unchanged (issue 10)."""
    reports = []
    for seed in range(1_000, 1_060):
        skills = skills_for(seed)
        moved = concentrated_drop(skills, share=0.20, drop=0.25)
        reports.append(report(draw_build(seed, "base", skills), draw_build(seed, "cand", moved)))
    mean_test_blocks = rate(
        reports, lambda r: any(f.finding == "mean_drop" and f.verdict == "block" for f in r.findings)
    )
    assert rate(reports, blocked) >= 0.95
    assert mean_test_blocks <= 0.10  # the mean test cannot see it: the concentrated-drop test does

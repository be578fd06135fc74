"""Noise bands (docs/methods.md: unit of inference, noise band): closed form, variance components, bootstrap check, edge cases."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from eval_assets.release import NOISE_BAND_COLUMNS, noise_band_rows
from eval_assets.stats import (
    VerdictFrameError,
    between_build_variance,
    noise_band,
    scenario_table,
    validate_verdicts,
)

Z95 = stats.norm.ppf(0.975)


def t95(df: float) -> float:
    return float(stats.t.ppf(0.975, df))


def ws_half_width(variances: list[float], counts: list[int], n: int) -> float:
    """t(0.975, Welch-Satterthwaite df) * sqrt(sum 2 s^2/K) / n, as docs/methods.md writes it."""
    u = np.array([2 * v / k for v, k in zip(variances, counts, strict=True)])
    with np.errstate(invalid="ignore", divide="ignore"):
        nu = u.sum() ** 2 / np.sum(u**2 / (np.array(counts) - 1))
    return t95(nu) * math.sqrt(u.sum()) / n


def verdicts(scores: dict[str, list[float]], **statuses: list[str]) -> pd.DataFrame:
    """A scored frame from {scenario: [repeat scores]}; `statuses` adds failed/excluded repeats."""
    rows = [(sid, r, "scored", s, 0) for sid, values in scores.items() for r, s in enumerate(values)]
    for status, sids in statuses.items():
        for sid in sids:
            rows.append((sid, 100 + len(rows), status, math.nan, 0))
    return pd.DataFrame(rows, columns=["scenario_id", "repeat", "status", "score", "policy_failures"])


def exact_sd_repeats(mean: float, sd: float, k: int) -> list[float]:
    """k repeats whose sample mean and sample sd (ddof=1) are exactly `mean` and `sd`."""
    z = np.arange(k) - (k - 1) / 2
    return list(mean + sd * z / z.std(ddof=1))


def simulated(n: int, k: int, sd: float, skills: np.ndarray, seed: int) -> pd.DataFrame:
    """Clipped Gaussian repeats around `skills` (the sim model, drawn with numpy for speed)."""
    rng = np.random.default_rng(seed)
    scores = np.clip(skills[:, None] + sd * rng.standard_normal((n, k)), 0.0, 1.0)
    return verdicts({f"s{i:04d}": list(row) for i, row in enumerate(scores)})


def bootstrap_half_width(
    frame: pd.DataFrame,
    n_boot: int,
    rng: np.random.Generator,
    *,
    level: float = 0.95,
    small_sample_adjust: bool = True,
) -> float:
    """The oracle the closed-form band is checked against: the suite band by simulation. Each replicate
    draws K_i repeats with replacement within every scenario with >= 2 scored repeats, twice, and takes
    the difference of the two suite means; the half-width is half the central `level` interval of those
    differences. Scenarios are never resampled (that would count the within-scenario variance twice).
    Resampling K values has (K-1)/K times the ddof=1 variance; `small_sample_adjust` first scales each
    scenario's deviations by sqrt(K/(K-1)) so the bootstrap targets the closed form's variance."""
    scored = frame.loc[frame["status"] == "scored"]
    groups = [g.to_numpy(dtype=float) for _, g in scored.groupby("scenario_id")["score"] if len(g) >= 2]
    if small_sample_adjust:
        groups = [g.mean() + (g - g.mean()) * math.sqrt(len(g) / (len(g) - 1)) for g in groups]

    def suite_means() -> np.ndarray:
        return np.mean([rng.choice(g, size=(n_boot, len(g))).mean(axis=1) for g in groups], axis=0)

    differences = suite_means() - suite_means()
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(differences, [tail, 1.0 - tail])
    return float((high - low) / 2.0)


@pytest.mark.parametrize(("n", "expected"), [(100, 1.86), (200, 1.31), (400, 0.93)])
def test_reference_magnitudes_of_methods_section_2(n: int, expected: float) -> None:
    """K=5, within-scenario sd 15 on a 0-100 scale -> +/-1.86, 1.31, 0.93 at 100, 200, 400 scenarios."""
    frame = verdicts({f"s{i}": exact_sd_repeats(0.5, 0.15, 5) for i in range(n)})
    # the t quantile on n(K-1) Welch-Satterthwaite df is within 0.3% of the normal one at these sizes
    assert 100 * noise_band(frame).half_width == pytest.approx(expected, abs=0.01)


def test_reference_magnitude_holds_approximately_on_simulated_repeats() -> None:
    band = noise_band(simulated(200, 5, 0.15, np.full(200, 0.5), seed=3))
    assert 100 * band.half_width == pytest.approx(1.31, rel=0.10)


def test_suite_and_scenario_half_widths_follow_the_closed_form_with_unequal_repeats() -> None:
    frame = verdicts(
        {"a": exact_sd_repeats(0.3, 0.1, 5), "b": exact_sd_repeats(0.6, 0.2, 4), "c": [0.9, 0.7, 0.8]}
    )
    band = noise_band(frame)
    variances = {"a": 0.1**2, "b": 0.2**2, "c": np.var([0.9, 0.7, 0.8], ddof=1)}
    counts = {"a": 5, "b": 4, "c": 3}
    expected = ws_half_width([variances[s] for s in "abc"], [counts[s] for s in "abc"], 3)
    assert band.half_width == pytest.approx(expected)
    per = band.scenarios.set_index("scenario_id")
    for sid in "abc":
        one = t95(counts[sid] - 1) * math.sqrt(2 * variances[sid] / counts[sid])
        assert per.loc[sid, "half_width"] == pytest.approx(one)
        assert per.loc[sid, "n_repeats"] == counts[sid]


def test_failed_and_excluded_repeats_are_skipped_not_scored_zero() -> None:
    scores = {f"s{i}": exact_sd_repeats(0.5 + 0.01 * i, 0.1, 5) for i in range(10)}
    clean = noise_band(verdicts(scores))
    with_missing = noise_band(verdicts(scores, failed=["s1", "s2"], excluded=["s3"]))
    assert with_missing.half_width == pytest.approx(clean.half_width)
    assert with_missing.n_repeats == clean.n_repeats == 50


def test_scenarios_with_fewer_than_two_scored_repeats_are_reported_unusable_not_zero() -> None:
    scores = {f"s{i}": exact_sd_repeats(0.5, 0.1, 5) for i in range(4)}
    band_without = noise_band(verdicts(scores))
    band = noise_band(verdicts({**scores, "lonely": [0.2]}, failed=["lonely"] * 4))
    assert band.unusable == ("lonely",)
    assert band.n_usable == 4 and band.n_scenarios == 5
    assert band.half_width == pytest.approx(band_without.half_width)
    lonely = band.scenarios.set_index("scenario_id").loc["lonely"]
    assert math.isnan(lonely["variance"]) and math.isnan(lonely["half_width"])
    assert any("fewer than 2 scored repeats" in note for note in band.notes)


@pytest.mark.parametrize("lonely", [10, 11, 12])
def test_the_note_on_left_out_scenarios_names_ten_and_counts_the_rest(lonely: int) -> None:
    """Ten left-out scenarios are named; from the eleventh on, the note says how many more."""
    ids = [f"z{i:02d}" for i in range(lonely)]
    band = noise_band(verdicts({"a": [0.4, 0.6], "b": [0.5, 0.7], **{i: [0.5] for i in ids}}))
    more = f" and {lonely - 10} more" if lonely > 10 else ""
    assert band.notes[0] == (
        f"{lonely} scenario(s) with fewer than 2 scored repeats left out of the band: {', '.join(ids[:10])}{more}"
    )


def test_the_notes_say_why_there_is_no_band_or_no_between_variance() -> None:
    assert noise_band(verdicts({"a": [0.5]})).notes[:2] == (
        "1 scenario(s) with fewer than 2 scored repeats left out of the band: a",
        "no scenario has 2 scored repeats: no band",
    )
    assert noise_band(verdicts({"a": [0.4, 0.6]})).notes[:1] == (
        "one usable scenario: no between-scenario variance",
    )


def test_negative_between_scenario_variance_is_floored_at_zero_and_flagged() -> None:
    same_mean = {f"s{i}": list(np.roll([0.3, 0.4, 0.5, 0.6, 0.7], i)) for i in range(6)}
    band = noise_band(verdicts(same_mean))
    assert band.between_var == 0.0
    assert band.between_var_floored
    assert any("floored" in note for note in band.notes)
    assert band.optimal_repeats(cost_scenario=1.0, cost_repeat=1.0) is None


def test_variance_components_recover_the_simulated_truth() -> None:
    skills = np.random.default_rng(11).uniform(0.35, 0.65, 3000)
    band = noise_band(simulated(3000, 5, 0.1, skills, seed=12))
    assert band.within_var == pytest.approx(0.1**2, rel=0.05)
    assert band.between_var == pytest.approx(np.var(skills, ddof=1), rel=0.10)
    assert not band.between_var_floored
    expected_k = math.sqrt(band.within_var * 3.0 / (band.between_var * 1.0))  # Cochran: no factor 2
    assert band.optimal_repeats(cost_scenario=3.0, cost_repeat=1.0) == pytest.approx(expected_k)


def test_suite_mean_and_clustered_standard_error_are_taken_over_scenarios() -> None:
    scores = {"a": [0.2, 0.4], "b": [0.6, 0.6, 0.9], "c": [1.0, 0.8]}
    band = noise_band(verdicts(scores))
    means = np.array([0.3, 0.7, 0.9])
    assert band.suite_mean == pytest.approx(means.mean())
    assert band.suite_se == pytest.approx(means.std(ddof=1) / math.sqrt(3))


def test_band_table_has_a_suite_row_then_scenario_rows_with_symmetric_limits() -> None:
    band = noise_band(verdicts({f"s{i}": exact_sd_repeats(0.5, 0.1, 5) for i in range(3)}))
    table = noise_band_rows(band, "b1", "j-v1")
    assert tuple(table.columns) == (*NOISE_BAND_COLUMNS, "build", "judge_version")
    assert list(table["scope"]) == ["suite", "scenario", "scenario", "scenario"]
    assert pd.isna(table.loc[0, "scenario_id"]) and table.loc[0, "between_var"] == band.between_var
    assert table["between_var"].iloc[1:].isna().all()
    assert np.allclose(table["low"], -table["half_width"]) and np.allclose(table["high"], table["half_width"])
    assert table.loc[0, "n_repeats"] == 15


def test_no_verdicts_give_no_figures_rather_than_zeros() -> None:
    band = noise_band(pd.DataFrame())
    assert (band.half_width, band.suite_mean, band.suite_se, band.within_var, band.between_var) == (None,) * 5
    assert band.n_repeats == 0
    assert noise_band_rows(band, "b1", "j-v1")[["mean", "half_width", "low", "high"]].isna().all().all()


def test_one_usable_scenario_has_a_band_but_no_between_variance() -> None:
    band = noise_band(verdicts({"only": exact_sd_repeats(0.5, 0.1, 5)}))
    assert band.half_width == pytest.approx(t95(4) * math.sqrt(2 * 0.01 / 5))
    assert band.between_var is None and band.suite_se is None


def test_closed_form_agrees_with_within_scenario_bootstrap_within_10_percent() -> None:
    skills = np.random.default_rng(5).uniform(0.4, 0.9, 200)
    frame = simulated(200, 5, 0.15, skills, seed=6)
    closed = noise_band(frame).half_width
    boot = bootstrap_half_width(frame, 4000, np.random.default_rng(7))
    assert boot == pytest.approx(closed, rel=0.10)


def test_unadjusted_bootstrap_understates_the_band_by_sqrt_k_minus_1_over_k() -> None:
    """Why the bootstrap rescales deviations: plain resampling of 5 repeats loses 11% of the width."""
    frame = simulated(400, 5, 0.15, np.full(400, 0.5), seed=8)
    closed = noise_band(frame).half_width
    raw = bootstrap_half_width(frame, 4000, np.random.default_rng(9), small_sample_adjust=False)
    assert raw / closed == pytest.approx(math.sqrt(4 / 5), rel=0.04)


scenario_repeats = st.lists(
    st.lists(st.one_of(st.floats(0.0, 1.0), st.sampled_from(["failed", "excluded"])), min_size=1, max_size=6),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(scenario_repeats)
def test_band_matches_a_direct_implementation_of_the_definition(data: list[list[float | str]]) -> None:
    rows = []
    for i, repeats in enumerate(data):
        for r, value in enumerate(repeats):
            scored = not isinstance(value, str)
            rows.append((f"s{i}", r, "scored" if scored else value, value if scored else math.nan, 0))
    frame = pd.DataFrame(rows, columns=["scenario_id", "repeat", "status", "score", "policy_failures"])
    scored = [[v for v in repeats if not isinstance(v, str)] for repeats in data]
    usable = [np.array(s) for s in scored if len(s) >= 2]
    band = noise_band(frame)
    if not usable:
        assert band.half_width is None
        return
    expected = ws_half_width([np.var(s, ddof=1) for s in usable], [len(s) for s in usable], len(usable))
    if math.isfinite(expected):
        assert band.half_width == pytest.approx(expected, abs=1e-9)
    assert band.within_var == pytest.approx(np.mean([np.var(s, ddof=1) for s in usable]), abs=1e-12)
    shuffled = noise_band(frame.sample(frac=1.0, random_state=1))
    assert shuffled.half_width == pytest.approx(band.half_width, abs=1e-12)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f.drop(columns=["status"]), "lacks column"),
        (lambda f: f.assign(status="pending"), "unknown status"),
        (lambda f: f.assign(score=np.where(f.index == 0, np.nan, f["score"])), "finite score"),
        (lambda f: f.assign(score=np.where(f.index == 0, 1.5, f["score"])), "finite score"),
        (lambda f: f.assign(status=np.where(f.index == 0, "failed", f["status"])), "carry a score"),
        (lambda f: f.assign(repeat=0), "appears more than once"),
        (lambda f: f.assign(policy_failures=-1), ">= 0"),
        (lambda f: f.assign(repeat=0.5), "whole number"),
    ],
)
def test_malformed_verdict_frames_are_refused_with_the_reason(change: object, message: str) -> None:
    frame = verdicts({"a": [0.2, 0.4, 0.6]})
    with pytest.raises(VerdictFrameError, match=message):
        validate_verdicts(change(frame))  # type: ignore[operator]


def test_a_policy_count_on_a_row_without_output_is_refused() -> None:
    frame = verdicts({"a": [0.2, 0.4]}, excluded=["a"]).assign(has_output=[True, True, False])
    frame.loc[frame["status"] == "excluded", "policy_failures"] = 1
    with pytest.raises(VerdictFrameError, match="without output carries policy failures"):
        validate_verdicts(frame)


def test_an_excluded_row_that_produced_output_keeps_its_policy_failures() -> None:
    """A scenario stopped by a ceiling is excluded from the scores, not from the policy check (issue 11)."""
    frame = verdicts({"a": [0.2, 0.4]}, excluded=["a"])
    frame.loc[frame["status"] == "excluded", "policy_failures"] = 1
    assert validate_verdicts(frame)["has_output"].tolist() == [True, True, True]


def test_a_registered_rebuild_adds_its_run_to_run_variance_to_the_band() -> None:
    skills = np.random.default_rng(3).uniform(0.4, 0.8, 100)
    build = simulated(100, 5, 0.1, skills, seed=4)
    shifted = simulated(100, 5, 0.1, skills + 0.05, seed=5)  # the rebuild moved as a whole
    same = simulated(100, 5, 0.1, skills, seed=6)
    plain, wide = noise_band(build), noise_band(build, rebuild=shifted)
    assert wide.between_build_df == 1 and wide.between_build_var > 0.0005
    assert wide.half_width > 3 * plain.half_width
    assert noise_band(build, rebuild=same).half_width < 1.5 * plain.half_width
    assert any("no registered unchanged rebuild" in n for n in plain.notes)
    assert not any("no registered unchanged rebuild" in n for n in wide.notes)
    assert wide.between_build_var < 0.01  # about 0.05^2 / 2: the variance, not its 1 degree of freedom
    # without a rebuild the band's df is Welch-Satterthwaite's over the scenarios' repeat variances
    per = build.groupby("scenario_id")["score"].agg(["var", "count"])
    u = 2 * per["var"] / per["count"]
    assert plain.band_df == pytest.approx(u.sum() ** 2 / (u**2 / (per["count"] - 1)).sum(), rel=1e-9)


def _table(rows: dict[str, tuple[float, float, int]]) -> pd.DataFrame:
    """A per-scenario table (`scenario_id` -> mean, variance, n_scored), as `between_build_variance` reads it."""
    return pd.DataFrame.from_dict(rows, orient="index", columns=["mean", "variance", "n_scored"])


def test_between_build_variance_is_half_the_shift_squared_less_the_repeat_noise_over_shared_scenarios() -> (
    None
):
    """tau^2 = (D^2 - V_w) / 2 by hand: D = 0.3 over a, b, c (scored >= 2 times in both builds, c exactly
    twice in each); e (once in the build) and f (only in the build) and d (only in the rebuild) do not count."""
    build = _table(
        {
            "a": (0.5, 0.01, 5),
            "b": (0.6, 0.02, 4),
            "c": (0.7, 0.03, 2),
            "e": (0.3, math.nan, 1),
            "f": (0.9, 0.05, 5),
        }
    )
    rebuild = _table(
        {
            "a": (0.8, 0.02, 5),
            "b": (0.9, 0.01, 5),
            "c": (1.0, 0.04, 2),
            "d": (0.1, 0.01, 5),
            "e": (0.5, 0.01, 2),
        }
    )
    within = (0.01 / 5 + 0.02 / 5 + 0.02 / 4 + 0.01 / 5 + 0.03 / 2 + 0.04 / 2) / 3**2
    tau2, df = between_build_variance(build, rebuild)
    assert tau2 == pytest.approx((0.3**2 - within) / 2.0, rel=1e-12) and df == 1


def test_between_build_variance_needs_two_shared_scenarios_and_is_never_negative() -> None:
    two = _table({"a": (0.5, 0.01, 2), "b": (0.6, 0.01, 2)})
    assert between_build_variance(two, _table({"a": (0.5, 0.01, 2), "b": (0.6, 0.01, 2)})) == (
        0.0,
        1,
    )  # floored
    assert between_build_variance(two, _table({"a": (0.9, 0.01, 2)})) == (
        0.0,
        0,
    )  # one shared: nothing measured


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.1])
def test_a_confidence_level_outside_0_1_is_refused(level: float) -> None:
    with pytest.raises(ValueError) as refused:
        noise_band(verdicts({"a": [0.4, 0.6], "b": [0.5, 0.7]}), level=level)
    assert str(refused.value) == f"confidence level must be in (0, 1), got {level}"


def test_two_scenarios_give_every_figure_by_hand_and_a_scenario_with_nothing_scored_is_no_scenario() -> None:
    """Exactly two usable scenarios (the fewest with a between-scenario variance and a suite standard
    error), one with a single scored repeat (unusable) in a second band, and one with nothing scored:
    every figure is the hand-computed one."""
    two = {"a": [0.2, 0.4], "b": [0.6, 0.9, 0.6]}  # means 0.3 and 0.7, variances 0.02 and 0.03
    band = noise_band(verdicts(two, failed=["gone", "gone"]))
    assert band.level == 0.95 and band.n_scenarios == 2 and list(band.scenarios["scenario_id"]) == ["a", "b"]
    assert band.suite_se == pytest.approx(0.2, abs=1e-12)  # sd(0.3, 0.7) / sqrt(2)
    assert band.within_var == pytest.approx(0.025, abs=1e-12)
    assert band.between_var == pytest.approx(0.08 - (0.02 / 2 + 0.03 / 3) / 2, abs=1e-12)
    assert not band.between_var_floored
    assert band.notes == ("no registered unchanged rebuild: the band covers repeat noise only",)
    assert band.optimal_repeats() == pytest.approx(math.sqrt(0.025 / 0.07))
    assert band.optimal_repeats(cost_scenario=4.0, cost_repeat=2.0) == pytest.approx(math.sqrt(0.025 * 4 / (0.07 * 2)))
    lonely = noise_band(verdicts({**two, "c": [0.5]}))
    assert lonely.n_scenarios == 3 and lonely.unusable == ("c",) and lonely.between_var == band.between_var


def test_one_usable_scenario_is_not_a_floored_variance() -> None:
    band = noise_band(verdicts({"a": [0.4, 0.6], "b": [0.5]}))
    assert band.between_var is None and band.between_var_floored is False
    assert not any("floored" in note for note in band.notes)


def test_the_floored_note_reads_whole() -> None:
    same_mean = {f"s{i}": list(np.roll([0.3, 0.4, 0.5, 0.6, 0.7], i)) for i in range(6)}
    assert "between-scenario variance estimate was negative and is floored at 0" in noise_band(
        verdicts(same_mean)
    ).notes


def test_a_rebuilds_variance_enters_the_band_on_its_own_degrees_of_freedom() -> None:
    """V = sum(u_i)/n^2 + 2 tau^2 and nu = V^2 / (sum (u_i/n^2)^2/(K_i-1) + (2 tau^2)^2 / 1): the
    rebuild's term carries its one degree of freedom into the Welch-Satterthwaite df."""
    build = verdicts({"a": [0.2, 0.4], "b": [0.6, 0.9, 0.6]})
    rebuild = verdicts({"a": [0.5, 0.7], "b": [0.9, 1.0, 0.8]})
    tau2, df = between_build_variance(scenario_table(validate_verdicts(build)), scenario_table(validate_verdicts(rebuild)))
    assert df == 1 and tau2 > 0
    band = noise_band(build, rebuild=rebuild)
    u = np.array([2 * 0.02 / 2, 2 * 0.03 / 3]) / 4
    var = u.sum() + 2 * tau2
    nu = var**2 / ((u**2 / np.array([1, 2])).sum() + (2 * tau2) ** 2)
    assert band.band_df == pytest.approx(nu)
    assert band.half_width == pytest.approx(float(stats.t.ppf(0.975, nu)) * math.sqrt(var))

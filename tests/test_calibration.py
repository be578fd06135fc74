"""Calibration offsets (docs/methods.md: bridges): the statistics on the sim's own judge model, and the bridge run.

The simulated frames draw judge scores with `eval_assets.providers.simmodel.judge_value` exactly as the
sim judge does: one rng per (seed, model, build, scenario, repeat, try), one draw per criterion in the
rubric's order, so "v2 = v1 with bias +0.3" means the same draws shifted by 0.3 rubric points, as in
the running sim. Subject skills span 0.25-0.7 per scenario, so few scores clip at the top of the
1-5 scale (clipping pulls a +0.3 bias below 0.3: that is a property of bounded scales, which is
why the slope and the equating function are published too).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from eval_assets.bridge import (
    NORMALISED_POINT_SIZE,
    BridgeError,
    bridge_refusal,
    point_scale,
    published_offset,
    rubric_points,
    run_bridge,
    to_new_scale,
)
from eval_assets.capability.materialize import materialize_judge_verdicts, materialize_scenario_runs
from eval_assets.capability.track import Track
from eval_assets.config import Judge, Project
from eval_assets.home import EvalHome
from eval_assets.providers.simmodel import judge_value, rng_for, subject_quality
from eval_assets.stats import MIN_SCENARIOS, CalibrationFrameError, calibrate, krippendorff_alpha_interval

HELPFULNESS_WEIGHTS = (3.0, 2.0, 1.0)  # rubrics/helpfulness-v1.yaml, in criterion order


def simulate(
    *,
    bias: float = 0.3,
    noise_old: float = 0.3,
    noise_new: float = 0.3,
    seed: int = 1,
    scenarios: int = 15,
    builds: int = 3,
    repeats: int = 5,
) -> pd.DataFrame:
    """Paired helpfulness scores (rubric points) of v1 (bias 0) and v2 (bias `bias`) on the same outputs."""
    rows = []
    for b in range(builds):
        for s in range(scenarios):
            skill = 0.25 + 0.45 * s / max(1, scenarios - 1)
            for r in range(1, repeats + 1):
                build, sid = f"build-{b}", f"scenario-{s}"
                q = subject_quality(
                    seed=seed, build=build, scenario_id=sid, repeat=r, skill=skill, noise=0.12
                )

                def points(
                    bias_: float, noise: float, build: str = build, sid: str = sid, r: int = r, q: float = q
                ) -> float:
                    rng = rng_for("judge", seed, "simjudge/judge-a", build, sid, r, 1)
                    values = [
                        judge_value(quality=q, low=1, high=5, bias=bias_, noise=noise, rng=rng, integer=True)
                        for _ in HELPFULNESS_WEIGHTS
                    ]
                    return float(np.average(values, weights=HELPFULNESS_WEIGHTS))

                rows.append(
                    {
                        "build": build,
                        "scenario_id": sid,
                        "repeat": r,
                        "old_score": points(0.0, noise_old),
                        "new_score": points(bias, noise_new),
                    }
                )
    return pd.DataFrame(rows)


# --- Krippendorff's alpha -----------------------------------------------------------------------------


def test_alpha_matches_a_hand_computed_two_coder_example() -> None:
    # units (1,1), (2,3), (3,3): n = 6 values; D_o = (0 + 2*1/1 + 0)/6 = 1/3;
    # D_e = 2*(6*33 - 13^2)/(6*5) = 58/30; alpha = 1 - (1/3)/(58/30) = 48/58
    assert krippendorff_alpha_interval(np.array([[1, 2, 3], [1, 3, 3]], dtype=float)) == pytest.approx(
        48 / 58
    )


def test_alpha_matches_krippendorffs_published_interval_example_with_missing_values() -> None:
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", 4 observers x 12 units: 0.849
    n = np.nan
    data = np.array(
        [
            [1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3],
            [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n],
        ]
    )
    assert krippendorff_alpha_interval(data) == pytest.approx(0.849, abs=5e-4)


def test_alpha_is_one_for_perfect_agreement_and_none_when_undefined() -> None:
    assert krippendorff_alpha_interval(np.array([[1.0, 2.0, 5.0], [1.0, 2.0, 5.0]])) == pytest.approx(1.0)
    assert krippendorff_alpha_interval(np.array([[3.0, 3.0], [3.0, 3.0]])) is None  # no variation
    assert krippendorff_alpha_interval(np.array([[1.0, n := np.nan], [n, 2.0]])) is None  # nothing pairable


def test_alpha_is_invariant_to_a_shared_affine_rescaling() -> None:
    rng = np.random.default_rng(3)
    data = rng.normal(size=(3, 40))
    data[rng.random(size=data.shape) < 0.1] = np.nan
    assert krippendorff_alpha_interval(data * 4 + 1) == pytest.approx(krippendorff_alpha_interval(data))


# --- calibrate: the acceptance on the sim's model ---------------------------------------------


def test_bias_of_0_3_points_is_published_with_a_ci_containing_0_3() -> None:
    cal = calibrate(simulate(bias=0.3))
    assert cal.published, cal.reasons
    assert cal.reasons == ()
    assert cal.ci_low is not None and cal.ci_high is not None
    assert cal.ci_low <= 0.3 <= cal.ci_high
    assert cal.half_width is not None and cal.half_width <= 0.5
    assert cal.krippendorff_alpha is not None and cal.krippendorff_alpha >= 0.8
    assert (cal.n, cal.n_scenarios) == (225, 15)


def _clustered(sizes: list[int], seed: int = 0, bias: float = 0.3) -> pd.DataFrame:
    """Continuous paired scores, scenario i holding sizes[i] outputs, with a per-scenario offset."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, size in enumerate(sizes):
        level, own = rng.normal(3.0, 0.6), rng.normal(0.0, 0.2)
        for r in range(1, size + 1):
            true = level + rng.normal(0.0, 0.4)
            old, new = true + rng.normal(0.0, 0.3), true + bias + own + rng.normal(0.0, 0.3)
            rows.append(
                {"build": "b", "scenario_id": f"s{i}", "repeat": r, "old_score": old, "new_score": new}
            )
    return pd.DataFrame(rows)


def test_offset_ci_with_equal_scenarios_is_the_t_interval_on_scenario_means_on_g_minus_1_df() -> None:
    frame = _clustered([4] * 5)
    cal = calibrate(frame)
    means = (frame["new_score"] - frame["old_score"]).groupby(frame["scenario_id"]).mean()
    sem = float(means.std(ddof=1) / np.sqrt(5))
    low, high = stats.t.interval(0.95, 4, loc=float(means.mean()), scale=sem)
    assert cal.ci_df == 4
    assert (cal.ci_low, cal.ci_high) == (pytest.approx(low, rel=1e-12), pytest.approx(high, rel=1e-12))
    # wider than the normal interval with the same SE by t(0.975; 4) / z(0.975) = 2.776 / 1.960
    assert cal.half_width / (stats.norm.ppf(0.975) * sem) == pytest.approx(
        stats.t.ppf(0.975, 4) / stats.norm.ppf(0.975)
    )
    assert cal.half_width / (stats.norm.ppf(0.975) * sem) == pytest.approx(1.41658, abs=1e-5)


def test_offset_ci_with_unequal_scenarios_uses_the_cr2_cluster_robust_se() -> None:
    sizes = [1, 2, 3, 5, 8, 13]
    frame = _clustered(sizes, seed=3)
    cal = calibrate(frame)
    d = (frame["new_score"] - frame["old_score"]).to_numpy()
    n, mean = len(d), d.mean()
    variance = 0.0  # Bell & McCaffrey: each scenario's residual sum over sqrt(1 - n_g / n)
    for sid, size in zip(frame["scenario_id"].unique(), sizes, strict=True):
        resid_sum = float((d[(frame["scenario_id"] == sid).to_numpy()] - mean).sum())
        variance += resid_sum**2 / (1.0 - size / n)
    se = np.sqrt(variance) / n
    q = stats.t.ppf(0.975, len(sizes) - 1)
    assert cal.offset == pytest.approx(mean)
    assert (cal.ci_low, cal.ci_high) == (pytest.approx(mean - q * se), pytest.approx(mean + q * se))


def test_noise_large_enough_that_alpha_falls_below_0_8_is_not_published_for_that_reason() -> None:
    cal = calibrate(simulate(bias=0.3, noise_new=1.5))
    assert not cal.published
    assert cal.krippendorff_alpha is not None and cal.krippendorff_alpha < 0.8
    assert len(cal.reasons) == 1
    assert cal.reasons[0].startswith(f"Krippendorff's alpha {cal.krippendorff_alpha:.3f} < 0.80")


def test_too_few_outputs_for_a_half_point_ci_is_not_published_and_says_how_many_are_needed() -> None:
    cal = calibrate(simulate(noise_new=2.0, scenarios=3, builds=1, repeats=2))
    assert not cal.published
    assert cal.half_width is not None and cal.half_width > 0.5
    why = next(r for r in cal.reasons if r.startswith("95% CI half-width"))
    assert f"about {cal.n_needed} paired outputs needed, have 6" in why
    assert cal.n_needed is not None and cal.sd_diff is not None
    assert cal.n_needed == int(np.ceil((1.959964 * cal.sd_diff / 0.5) ** 2))


# --- calibrate: the other figures ------------------------------------------------------------------------


def test_bland_altman_limits_are_the_offset_plus_minus_1_96_sd() -> None:
    frame = simulate(bias=0.3, noise_new=0.6)
    cal = calibrate(frame)
    d = frame["new_score"] - frame["old_score"]
    assert cal.offset == pytest.approx(d.mean())
    assert cal.sd_diff == pytest.approx(d.std(ddof=1))
    assert cal.ba_low == pytest.approx(d.mean() - 1.959964 * d.std(ddof=1), abs=1e-5)
    assert cal.ba_high == pytest.approx(d.mean() + 1.959964 * d.std(ddof=1), abs=1e-5)
    assert cal.spearman_rho == pytest.approx(
        stats.spearmanr(frame["old_score"], frame["new_score"]).statistic
    )


def _continuous(slope: float, intercept: float, noise: float, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    scen = np.repeat([f"s{i}" for i in range(20)], 10)
    old = rng.normal(3.0, 0.8, size=200) + np.repeat(rng.normal(0, 0.5, 20), 10)
    new = intercept + slope * old + noise * rng.normal(size=200)
    return pd.DataFrame(
        {
            "build": "b",
            "scenario_id": scen,
            "repeat": np.tile(np.arange(1, 11), 20),
            "old_score": old,
            "new_score": new,
        }
    )


def test_a_slope_ci_excluding_1_publishes_the_linear_equating_function() -> None:
    frame = _continuous(slope=1.5, intercept=-1.2, noise=0.05)
    cal = calibrate(frame)
    assert cal.slope_ci_low is not None and cal.slope_ci_low > 1.0 and cal.constant_offset is False
    assert cal.published, cal.reasons
    assert cal.equating_slope == cal.slope == pytest.approx(1.5, abs=0.05)
    assert cal.equating_intercept == pytest.approx(
        frame["new_score"].mean() - cal.equating_slope * frame["old_score"].mean()
    )
    assert cal.to_new_scale(3.0) == pytest.approx(cal.equating_intercept + cal.equating_slope * 3.0)


def test_a_pure_shift_publishes_a_constant_offset_and_no_equating_function() -> None:
    frame = _continuous(slope=1.0, intercept=0.3, noise=0.0)
    cal = calibrate(frame)
    assert cal.published and cal.offset == pytest.approx(0.3)
    assert cal.constant_offset is True and cal.constant_offset_p == 1.0  # zero spread by tolerance
    assert cal.slope_ci_low is not None and cal.slope_ci_low <= 1.0 <= (cal.slope_ci_high or 0.0)
    assert cal.equating_slope is None and cal.equating_intercept is None
    assert cal.to_new_scale(2.0) == pytest.approx(2.3)


def _levels(
    scenarios: int, repeats: int, *, slope: float, sd_old: float, sd_new: float, seed: int
) -> pd.DataFrame:
    """Scenario levels N(3, 0.6), outputs' true scores +-0.4; old = true + noise; new = 3 + slope (true - 3)
    + 0.3 + noise: a pure offset of 0.3 at slope 1."""
    rng = np.random.default_rng(seed)
    scen = np.repeat(np.arange(scenarios), repeats)
    true = 3.0 + rng.normal(0.0, 0.6, scenarios)[scen] + rng.normal(0.0, 0.4, len(scen))
    return pd.DataFrame(
        {
            "build": "b",
            "scenario_id": [f"s{i}" for i in scen],
            "repeat": np.tile(np.arange(1, repeats + 1), scenarios),
            "old_score": true + rng.normal(0.0, sd_old, len(scen)),
            "new_score": 3.0 + slope * (true - 3.0) + 0.3 + rng.normal(0.0, sd_new, len(scen)),
        }
    )


def test_a_pure_offset_with_heavy_old_judge_noise_is_constant_where_ols_is_attenuated() -> None:
    frame = _levels(200, 5, slope=1.0, sd_old=1.0, sd_new=0.2, seed=11)
    ols = np.polyfit(frame["old_score"], frame["new_score"], 1)[0]
    assert ols < 0.45  # regression dilution: var(true) / (var(true) + 1.0) = 0.52 / 1.52
    cal = calibrate(frame)
    assert cal.slope == pytest.approx(1.0, abs=0.1)
    assert cal.constant_offset is True
    assert cal.slope_ci_low is not None and cal.slope_ci_high is not None
    assert cal.slope_ci_low < 1.0 < cal.slope_ci_high
    assert cal.equating_slope is None and cal.equating_intercept is None


def test_a_real_slope_under_heavy_old_judge_noise_publishes_the_equating_function_with_that_slope() -> None:
    frame = _levels(200, 5, slope=1.5, sd_old=1.0, sd_new=0.2, seed=12)
    cal = calibrate(frame, min_alpha=0.0)  # alpha is low with this much noise; the slope is the point
    assert np.polyfit(frame["old_score"], frame["new_score"], 1)[0] < 0.6  # OLS: 1.5 * 0.52 / 1.52
    assert cal.constant_offset is False and cal.constant_offset_p is not None and cal.constant_offset_p < 0.05
    assert cal.slope_ci_low is not None and cal.slope_ci_high is not None
    assert 1.0 < cal.slope_ci_low < 1.5 < cal.slope_ci_high
    assert cal.equating_slope == cal.slope
    assert cal.equating_intercept == pytest.approx(
        frame["new_score"].mean() - cal.slope * frame["old_score"].mean()
    )
    assert cal.published, cal.reasons
    assert cal.to_new_scale(2.0) == pytest.approx(cal.equating_intercept + 2.0 * cal.slope)


def _check_by_hand(frame: pd.DataFrame, level: float = 0.95) -> tuple[float, float, float, float]:
    """T, D, the jackknife SE of T and the two-sided p-value, computed cell by cell with np.cov."""

    def moments(part: pd.DataFrame) -> tuple[float, float]:
        means, errors = [], []
        for _, cell in part.groupby(["build", "scenario_id"]):
            x, d = cell["old_score"].to_numpy(), (cell["new_score"] - cell["old_score"]).to_numpy()
            if len(x) < 2:
                continue
            means.append((x.mean(), d.mean()))
            errors.append(np.cov(x, d, ddof=1) / len(x))
        between = np.cov(np.array(means).T, ddof=1)
        error = np.mean(errors, axis=0)
        return between[0, 1] - error[0, 1], between[0, 0] - error[0, 0]

    t_all, d_all = moments(frame)
    ids = sorted(frame["scenario_id"].unique())
    loo = np.array([moments(frame[frame["scenario_id"] != sid])[0] for sid in ids])
    g = len(ids)
    se = float(np.sqrt((g - 1) / g * np.sum((loo - loo.mean()) ** 2)))
    return t_all, d_all, se, float(2 * stats.t.sf(abs(t_all) / se, g - 1))


def test_the_constant_offset_check_is_the_corrected_between_cell_covariance_with_a_scenario_jackknife() -> (
    None
):
    frame = pd.concat(
        [
            _levels(9, 3, slope=1.2, sd_old=0.5, sd_new=0.3, seed=21).assign(build="b1"),
            _levels(9, 4, slope=1.2, sd_old=0.5, sd_new=0.3, seed=22).assign(build="b2"),
        ]
    )
    frame = frame[~((frame["build"] == "b1") & (frame["scenario_id"] == "s0") & (frame["repeat"] > 1))]
    t_stat, level_var, se, p = _check_by_hand(frame)  # the one-output cell (b1, s0) is left out
    cal = calibrate(frame, min_alpha=0.0)
    q = stats.t.ppf(0.975, 8)
    assert cal.slope == pytest.approx(1.0 + t_stat / level_var)
    assert cal.constant_offset_p == pytest.approx(p)
    assert (cal.slope_ci_low, cal.slope_ci_high) == (
        pytest.approx(1.0 + (t_stat - q * se) / level_var),
        pytest.approx(1.0 + (t_stat + q * se) / level_var),
    )
    assert cal.constant_offset is (p >= 0.05)


def test_fewer_than_5_scenarios_are_never_published() -> None:
    assert MIN_SCENARIOS == 5
    four = calibrate(_levels(4, 10, slope=1.0, sd_old=0.1, sd_new=0.1, seed=1))
    assert (
        four.half_width is not None and four.half_width < 0.5 and four.ci_df == 3
    )  # the CI alone would pass
    assert not four.published
    assert four.reasons == (
        "4 scenarios: a bridge needs at least 5 (the offset's interval has scenarios - 1 degrees of freedom, "
        "and the constant-offset check compares scenarios)",
    )
    five = calibrate(_levels(5, 10, slope=1.0, sd_old=0.1, sd_new=0.1, seed=1))
    assert five.published, five.reasons


def test_without_repeats_the_constant_offset_check_cannot_run_and_nothing_is_published() -> None:
    cal = calibrate(_levels(30, 1, slope=1.0, sd_old=0.1, sd_new=0.1, seed=2))
    assert cal.constant_offset is None and cal.slope is None and cal.constant_offset_p is None
    assert not cal.published
    assert cal.reasons == (
        "the constant-offset check cannot run: it needs at least 3 scenarios with two or more paired outputs "
        "of one build",
    )


def test_a_rejected_constant_offset_without_level_spread_has_no_equating_function_and_is_not_published() -> (
    None
):
    # every scenario's outputs are old (1, 3), new (1, 5): the cells' levels are equal (D < 0) while
    # within them the difference grows with the old score, identically in every scenario (SE of T = 0)
    rows = [
        {"build": "b", "scenario_id": f"s{i}", "repeat": r, "old_score": old, "new_score": new}
        for i in range(6)
        for r, (old, new) in enumerate([(1.0, 1.0), (3.0, 5.0)], start=1)
    ]
    cal = calibrate(pd.DataFrame(rows), min_alpha=0.0)
    assert cal.constant_offset is False and cal.slope is None
    assert cal.equating_slope is None and not cal.published
    assert cal.reasons == (
        "the offset is not constant (check p = 0) and no equating slope can be estimated: the old "
        "version's scenario levels do not differ beyond their own noise",
    )


def test_figures_scale_with_the_unit_and_acceptance_uses_point_size() -> None:
    frame = simulate(bias=0.3)
    quarter = frame.assign(old_score=frame["old_score"] / 4, new_score=frame["new_score"] / 4)
    a = calibrate(frame)
    b = calibrate(quarter, point_size=0.25)
    assert b.offset == pytest.approx((a.offset or 0) / 4)
    assert b.half_width == pytest.approx((a.half_width or 0) / 4)
    assert b.krippendorff_alpha == pytest.approx(a.krippendorff_alpha)
    assert (a.published, b.published) == (True, True)
    # the same quarter-scale frame judged as if it were in points would accept a 4x wider CI
    noisy = simulate(noise_new=2.0, scenarios=4, builds=1, repeats=3)
    noisy_q = noisy.assign(old_score=noisy["old_score"] / 4, new_score=noisy["new_score"] / 4)
    assert any("half-width" in r for r in calibrate(noisy_q, point_size=0.25).reasons)


def test_the_same_frame_gives_the_same_calibration() -> None:
    frame = simulate()
    assert calibrate(frame) == calibrate(frame)


def test_nothing_paired_or_one_scenario_is_not_published_with_the_reason() -> None:
    empty = pd.DataFrame(columns=["build", "scenario_id", "repeat", "old_score", "new_score"])
    cal = calibrate(empty)
    assert (cal.n, cal.offset, cal.published) == (0, None, False)
    assert cal.reasons == ("no output was scored by both judge versions",)
    one = simulate(scenarios=1, builds=1)
    cal = calibrate(one)
    assert not cal.published and cal.ci_low is None
    assert cal.reasons[0] == (
        "1 scenario: a bridge needs at least 5 (the offset's interval has scenarios - 1 degrees of freedom, "
        "and the constant-offset check compares scenarios)"
    )
    with pytest.raises(ValueError, match="not published"):
        cal.to_new_scale(3.0)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda f: f.drop(columns=["new_score"]), "missing columns: new_score"),
        (lambda f: f.assign(old_score=np.where(f.index == 0, np.nan, f["old_score"])), "finite"),
        (lambda f: pd.concat([f, f.iloc[:1]]), "duplicate"),
    ],
    ids=["missing-column", "nan-score", "duplicate-item"],
)
def test_a_malformed_paired_frame_is_refused(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CalibrationFrameError, match=message):
        calibrate(mutate(simulate(scenarios=3, builds=1)))


# --- rubric points -------------------------------------------------------------------------------------


def test_points_of_a_shared_numeric_scale_are_the_weighted_mean_of_criterion_values(project: Project) -> None:
    rubric = project.rubrics["helpfulness-v1"]
    values = {"correctness": 4, "completeness": 2, "clarity": 5}
    assert point_scale(rubric).unit == "rubric points [1, 5]"
    assert rubric_points(values, rubric) == pytest.approx(np.average([4, 2, 5], weights=HELPFULNESS_WEIGHTS))
    shifted = {k: v + 1 for k, v in values.items() if k != "clarity"} | {"clarity": 5}
    assert rubric_points(shifted, rubric) - rubric_points(values, rubric) == pytest.approx(5 / 6)


def test_points_of_a_label_and_bool_rubric_are_the_normalised_score(project: Project) -> None:
    rubric = project.rubrics["safety-compliance-v1"]
    scale = point_scale(rubric)
    assert (scale.low, scale.high, scale.point_size) == (0.0, 1.0, NORMALISED_POINT_SIZE)
    assert rubric_points({"refusal_quality": "evasive", "follows_policy": True}, rubric) == pytest.approx(
        (2 * 0.5 + 1 * 1.0) / 3
    )
    with pytest.raises(ValueError, match="do not validate"):
        rubric_points({"refusal_quality": "unsafe", "follows_policy": True}, rubric)


# --- the bridge run, end to end on the sim -------------------------------------------------------------

LOW_SKILL_BUILD = """\
id: bridge-low
milestone: 1
subject:
  model: sim/agent
  family: sim
  params: {skill: 0.45, noise: 0.15, seed: 5, error_rate: 0.0, policy_violation_rate: 0.0}
"""


def _version(project: Project, version: int, **params: float) -> Judge:
    v1 = project.judges["helpfulness-v1"]
    return v1.model_copy(
        update={"version": version, "bridges_from": "helpfulness-v1", "params": {**v1.params, **params}}
    )


@pytest.fixture
def bridged(project: Project, home: EvalHome, tmp_path: Path) -> Track:
    """The shipped project plus helpfulness-v2 (v1 with bias +0.3) and -v3 (v1 with noise 1.5),
    both bridging from v1, and one low-skill build with scenario_runs."""
    judges = dict(project.judges)
    judges["helpfulness-v2"] = _version(project, 2, bias=0.3)
    judges["helpfulness-v3"] = _version(project, 3, noise=1.5)
    track = Track(dataclasses.replace(project, judges=judges), home)
    manifest = tmp_path / "bridge-low.yaml"
    manifest.write_text(LOW_SKILL_BUILD)
    track.register_build(manifest)
    materialize_scenario_runs(track, "bridge-low", "runs-1")
    return track


def test_bridge_run_publishes_the_sim_bias_and_reuses_verdicts_the_second_time(bridged: Track) -> None:
    assert bridge_refusal(bridged.warehouse, bridged.judge("helpfulness-v2")) is not None  # before any bridge
    first = run_bridge(bridged, "helpfulness-v2", "bridge-1")
    assert first["builds"] == ["bridge-low"]
    assert first["verdicts_judged"] == ["bridge-low/helpfulness-v1", "bridge-low/helpfulness-v2"]
    assert first["verdicts_reused"] == []
    assert first["published"], first["reasons"]
    low, high = first["ci"]
    assert low <= 0.3 <= high
    # the counts, recomputed from the stored verdicts: pairs are the outputs BOTH versions scored
    verdicts = bridged.warehouse.query(
        "SELECT judge_version, scenario_id, repeat, status, criteria FROM judge_verdicts WHERE build = 'bridge-low'"
    )
    rubric = bridged.project.rubrics["helpfulness-v1"]
    scored = {
        v: {
            (r.scenario_id, r.repeat): rubric_points(json.loads(r.criteria), rubric)
            for r in verdicts[
                (verdicts["judge_version"] == v) & (verdicts["status"] == "scored")
            ].itertuples()
        }
        for v in ("helpfulness-v1", "helpfulness-v2")
    }
    paired = scored["helpfulness-v1"].keys() & scored["helpfulness-v2"].keys()
    failed_old = int(
        ((verdicts["judge_version"] == "helpfulness-v1") & (verdicts["status"] == "failed")).sum()
    )
    assert len(paired) > 0
    assert first["n_outputs"] == len(paired)
    assert first["unpaired_old"] == len(scored["helpfulness-v1"]) - len(paired)
    assert first["unpaired_new"] == len(scored["helpfulness-v2"]) - len(paired)
    assert first["old_failed"] == failed_old
    offset = float(np.mean([scored["helpfulness-v2"][k] - scored["helpfulness-v1"][k] for k in paired]))
    assert first["offset"] == pytest.approx(offset, abs=5e-5)  # the summary rounds to 4 places

    row = published_offset(bridged.warehouse, "helpfulness-v2")
    assert row is not None
    assert (row["judge_from"], row["judge_to"], row["builds"]) == (
        "helpfulness-v1",
        "helpfulness-v2",
        "bridge-low",
    )
    assert row["unit"] == "rubric points [1, 5]" and row["n_outputs"] == first["n_outputs"]
    assert bridge_refusal(bridged.warehouse, bridged.judge("helpfulness-v2")) is None
    assert row["offset_points"] == pytest.approx(offset)
    # the sim's +0.3 is a constant offset here: the check keeps it, and trends add it to old scores
    assert row["equating_slope"] is None and row["slope_ci_low"] < 1.0 < row["slope_ci_high"]
    assert to_new_scale(row, 3.0) == pytest.approx(3.0 + offset)

    again = run_bridge(bridged, "helpfulness-v2", "bridge-2")
    assert again["verdicts_judged"] == []
    assert again["verdicts_reused"] == ["bridge-low/helpfulness-v1", "bridge-low/helpfulness-v2"]
    assert again["offset"] == first["offset"] and again["ci"] == first["ci"]
    history = bridged.warehouse.query(
        "SELECT count(*) AS n FROM calibration_offsets_history WHERE judge_to = ?", ["helpfulness-v2"]
    )
    assert int(history["n"].iloc[0]) == 2


def test_a_noisy_new_version_is_not_published_and_release_decisions_refuse_it(bridged: Track) -> None:
    out = run_bridge(bridged, "helpfulness-v3", "bridge-1")
    assert not out["published"]
    assert any(r.startswith("Krippendorff's alpha") for r in out["reasons"])
    assert published_offset(bridged.warehouse, "helpfulness-v3") is None
    refusal = bridge_refusal(bridged.warehouse, bridged.judge("helpfulness-v3"))
    assert refusal is not None and "not published" in refusal and "Krippendorff" in refusal
    assert bridge_refusal(bridged.warehouse, bridged.judge("helpfulness-v1")) is None  # bridges from nothing


def test_newer_scenario_runs_make_existing_verdicts_stale_so_they_are_judged_again(bridged: Track) -> None:
    run_bridge(bridged, "helpfulness-v2", "bridge-1")
    materialize_scenario_runs(bridged, "bridge-low", "runs-2")
    out = run_bridge(bridged, "helpfulness-v2", "bridge-2")
    assert out["verdicts_judged"] == ["bridge-low/helpfulness-v1", "bridge-low/helpfulness-v2"]


def test_only_missing_verdicts_are_judged(bridged: Track) -> None:
    materialize_judge_verdicts(bridged, "bridge-low", "helpfulness-v1", "verdicts-1")
    out = run_bridge(bridged, "helpfulness-v2", "bridge-1")
    assert out["verdicts_reused"] == ["bridge-low/helpfulness-v1"]
    assert out["verdicts_judged"] == ["bridge-low/helpfulness-v2"]


def test_a_version_without_bridges_from_or_unknown_bridge_builds_cannot_bridge(bridged: Track) -> None:
    with pytest.raises(BridgeError, match="declares no bridges_from"):
        run_bridge(bridged, "helpfulness-v1", "bridge-1")
    judges = dict(bridged.project.judges)
    judges["helpfulness-v2"] = judges["helpfulness-v2"].model_copy(update={"bridge_builds": ["never-built"]})
    track = Track(dataclasses.replace(bridged.project, judges=judges), bridged.home)
    with pytest.raises(BridgeError, match="never-built"):
        run_bridge(track, "helpfulness-v2", "bridge-1")
    assert bridged.warehouse.query("SELECT count(*) AS n FROM calibration_offsets")["n"].iloc[0] == 0


def test_bridge_pairs_points_computed_from_the_stored_criteria(bridged: Track) -> None:
    run_bridge(bridged, "helpfulness-v2", "bridge-1")
    rubric = bridged.project.rubrics["helpfulness-v1"]
    frame = bridged.warehouse.query(
        "SELECT judge_version, criteria, score FROM judge_verdicts WHERE status = 'scored' AND build = 'bridge-low'"
    )
    for crit, score in zip(frame["criteria"], frame["score"], strict=True):
        assert rubric_points(json.loads(crit), rubric) == pytest.approx(1 + 4 * score)

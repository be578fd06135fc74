"""Judge-human agreement with its cluster-bootstrap interval: the warehouse views `judge_agreement` and
`judge_agreement_criteria` against the statistics module's reference (`cluster_bootstrap_alpha`), and
the rules the interval must keep (scenarios are resampled, not pairs; a named seed; no interval from
one scenario).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from shared import full_row

from eval_assets.human_scores import agreement_markdown
from eval_assets.stats import (
    AGREEMENT_N_BOOT,
    AGREEMENT_SEED,
    bootstrap_draw,
    cluster_bootstrap_alpha,
    draw_matrix,
    t975,
)
from eval_assets.warehouse import Warehouse


def _warehouse(tmp_path: Path, pairs: pd.DataFrame, judge_versions: tuple[str, ...] = ("g-v1",)) -> Warehouse:
    """Verdicts of build b1 under each judge version (all rubric q-v1) and one human score per pair.

    `pairs` columns: scenario_id, repeat, j, h (scores in [0, 1]) and ja, ha (criterion `a`, 1..5)."""
    wh = Warehouse(tmp_path / "wh")
    wh.initialise()
    for jv in judge_versions:
        verdicts = [
            full_row(
                "judge_verdicts",
                {
                    "build": "b1",
                    "judge_version": jv,
                    "scenario_id": r.scenario_id,
                    "repeat": int(r.repeat),
                    "rubric": "q-v1",
                    "status": "scored",
                    "score": float(r.j),
                    "criteria": json.dumps({"a": float(r.ja)}),
                },
            )
            for r in pairs.itertuples()
        ]
        wh.write_partition("judge_verdicts", {"build": "b1", "judge_version": jv}, verdicts, "r1")
    humans = [
        full_row(
            "human_scores",
            {
                "score_id": f"h{i}",
                "build": "b1",
                "scenario_id": r.scenario_id,
                "repeat": int(r.repeat),
                "rubric": "q-v1",
                "source": "human",
                "criteria": json.dumps({"a": float(r.ha)}),
                "score": float(r.h),
                "author": "ana",
            },
        )
        for i, r in enumerate(pairs.itertuples())
    ]
    wh.write_partition("human_scores", {"build": "b1"}, humans, "r1")
    return wh


def _clustered_pairs(rng: np.random.Generator, scenarios: int, copies: int = 0) -> pd.DataFrame:
    """Pairs whose judge-human disagreement is shared within a scenario (a scenario effect), with 1..6
    pairs per scenario; `copies` > 0 instead gives every scenario `copies` identical pairs."""
    rows: list[dict[str, Any]] = []
    for s in range(scenarios):
        level, shift = rng.normal(0.5, 0.2), rng.normal(0.0, 0.15)
        m = copies or int(rng.integers(1, 7))
        first = (level + rng.normal(0, 0.05), level + shift + rng.normal(0, 0.05))
        for r in range(m):
            h, j = first if copies else (level + rng.normal(0, 0.05), level + shift + rng.normal(0, 0.05))
            rows.append(
                {
                    "scenario_id": f"sc-{s:02d}",
                    "repeat": r + 1,
                    "h": h,
                    "j": j,
                    "ha": float(np.clip(round(1 + 4 * h), 1, 5)),
                    "ja": float(np.clip(round(1 + 4 * j), 1, 5)),
                }
            )
    return pd.DataFrame(rows)


def _width(row: pd.Series) -> float:
    return float(row["alpha_hi"] - row["alpha_lo"])


def test_the_views_interval_is_the_statistics_modules_cluster_bootstrap(tmp_path: Path) -> None:
    pairs = _clustered_pairs(np.random.default_rng(3), 13)
    wh = _warehouse(tmp_path, pairs)
    row = wh.query("SELECT * FROM judge_agreement").iloc[0]
    ref = cluster_bootstrap_alpha(pairs["j"], pairs["h"], pairs["scenario_id"])
    assert (row["n"], row["n_scenarios"], row["n_boot"]) == (len(pairs), 13, ref.n_boot)
    assert ref.n_boot == AGREEMENT_N_BOOT
    assert row["krippendorff_alpha"] == pytest.approx(ref.alpha, rel=1e-9)
    assert (row["alpha_lo"], row["alpha_hi"]) == pytest.approx((ref.low, ref.high), rel=1e-9)
    assert ref.low is not None and ref.high is not None and ref.low < ref.alpha < ref.high
    crit = wh.query("SELECT * FROM judge_agreement_criteria").iloc[0]
    ref_a = cluster_bootstrap_alpha(pairs["ja"], pairs["ha"], pairs["scenario_id"])
    assert (crit["criterion"], crit["n_scenarios"], crit["n_boot"]) == ("a", 13, ref_a.n_boot)
    assert (crit["krippendorff_alpha"], crit["alpha_lo"], crit["alpha_hi"]) == pytest.approx(
        (ref_a.alpha, ref_a.low, ref_a.high), rel=1e-9
    )
    other = cluster_bootstrap_alpha(pairs["j"], pairs["h"], pairs["scenario_id"], seed=AGREEMENT_SEED + 1)
    assert (other.low, other.high) != pytest.approx((ref.low, ref.high), rel=1e-9)  # the seed matters


def test_duckdb_and_python_draw_the_same_clusters(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    wh.initialise()
    got = wh.query(
        "SELECT b, j, ('0x' || substr(sha256('agreement-bootstrap/25/' || b || '/' || j), 1, 15))::BIGINT AS u "
        "FROM range(3) t(b), range(4) s(j) ORDER BY b, j"
    )
    assert list(got["u"]) == [bootstrap_draw(AGREEMENT_SEED, b, j) for b in range(3) for j in range(4)]
    key = f"agreement-bootstrap/{AGREEMENT_SEED}/2/3".encode()
    assert bootstrap_draw(AGREEMENT_SEED, 2, 3) == int(hashlib.sha256(key).hexdigest()[:15], 16)
    assert (draw_matrix(AGREEMENT_SEED, 3, 4) == got["u"].to_numpy().reshape(3, 4) % 4).all()


def test_the_interval_resamples_scenarios_not_pairs(tmp_path: Path) -> None:
    """Each of 15 scenarios holds 12 identical pairs. Resampling scenarios, the interval is as wide
    as with one pair per scenario (the copies add no information); resampling pairs would treat the
    180 pairs as independent and give an interval about sqrt(12) times narrower."""
    rng = np.random.default_rng(8)
    copied = _clustered_pairs(rng, 15, copies=12)
    single = copied.drop_duplicates("scenario_id")
    row = _warehouse(tmp_path / "copied", copied).query("SELECT * FROM judge_agreement").iloc[0]
    one = _warehouse(tmp_path / "single", single).query("SELECT * FROM judge_agreement").iloc[0]
    naive = cluster_bootstrap_alpha(copied["j"], copied["h"], copied["scenario_id"], resample="rows")
    assert naive.low is not None and naive.high is not None
    assert _width(row) == pytest.approx(_width(one), rel=0.15)
    assert _width(row) > 2.5 * (naive.high - naive.low)
    crit = _warehouse(tmp_path / "c2", copied).query("SELECT * FROM judge_agreement_criteria").iloc[0]
    naive_a = cluster_bootstrap_alpha(copied["ja"], copied["ha"], copied["scenario_id"], resample="rows")
    assert naive_a.low is not None and naive_a.high is not None
    assert _width(crit) > 2.5 * (naive_a.high - naive_a.low)


def test_one_scenario_gives_alpha_but_no_interval(tmp_path: Path) -> None:
    pairs = _clustered_pairs(np.random.default_rng(4), 1, copies=0)
    pairs = pd.concat([pairs] * 3, ignore_index=True).assign(repeat=lambda f: range(1, len(f) + 1))
    pairs["h"] = pairs["h"] + np.linspace(0, 0.3, len(pairs))
    row = _warehouse(tmp_path, pairs).query("SELECT * FROM judge_agreement").iloc[0]
    assert row["n_scenarios"] == 1 and row["n_boot"] == 0
    assert pd.notna(row["krippendorff_alpha"])
    assert pd.isna(row["alpha_lo"]) and pd.isna(row["alpha_hi"])
    ref = cluster_bootstrap_alpha(pairs["j"], pairs["h"], pairs["scenario_id"])
    assert (ref.low, ref.high, ref.n_boot) == (None, None, 0)


def test_judge_versions_sharing_a_rubric_each_pair_with_the_one_human_score(tmp_path: Path) -> None:
    pairs = _clustered_pairs(np.random.default_rng(5), 6)
    wh = _warehouse(tmp_path, pairs, judge_versions=("g-v1", "g-v2"))
    rows = wh.query("SELECT * FROM judge_agreement ORDER BY judge_version")
    assert list(rows["judge_version"]) == ["g-v1", "g-v2"] and set(rows["n"]) == {len(pairs)}
    assert rows["alpha_lo"].notna().all()
    crit = wh.query("SELECT judge_version, n FROM judge_agreement_criteria ORDER BY judge_version")
    assert list(crit["judge_version"]) == ["g-v1", "g-v2"] and set(crit["n"]) == {len(pairs)}


def test_the_report_line_gives_the_views_alpha_interval_pairs_and_scenarios(tmp_path: Path) -> None:
    pairs = _clustered_pairs(np.random.default_rng(6), 31)
    wh = _warehouse(tmp_path, pairs)
    row = wh.query("SELECT * FROM judge_agreement").iloc[0]
    crit = wh.query("SELECT * FROM judge_agreement_criteria").iloc[0]
    text = agreement_markdown(wh, "g-v1")
    assert text == (
        f"**Judge-human agreement** (g-v1, rubric q-v1): score alpha {row['krippendorff_alpha']:.3f} "
        f"[{row['alpha_lo']:.3f}, {row['alpha_hi']:.3f}], 95% cluster bootstrap over 31 scenarios, "
        f"{len(pairs)} pairs (0 from review).\n"
        f"Per criterion: a alpha {crit['krippendorff_alpha']:.3f} [{crit['alpha_lo']:.3f}, {crit['alpha_hi']:.3f}].\n"
    )
    one = agreement_markdown(_warehouse(tmp_path / "one", pairs[pairs["scenario_id"] == "sc-00"]), "g-v1")
    assert "(no interval: one scenario)" in one and "over 1 scenarios" in one
    assert (
        agreement_markdown(wh, "g-v9")
        == "**Judge-human agreement** (g-v9): no human score pairs with its verdicts yet.\n"
    )


def test_the_t_quantile_the_views_use_is_students_within_1e_4() -> None:
    got = np.array([t975(df) for df in range(1, 1001)])
    exact = stats.t.ppf(0.975, np.arange(1, 1001))
    assert np.max(np.abs(got / exact - 1)) < 1.1e-4
    assert abs(t975(30) / stats.t.ppf(0.975, 30) - 1) < 1e-7


def test_the_interval_is_centred_on_the_bias_corrected_alpha_and_capped_at_one(tmp_path: Path) -> None:
    """Near-perfect agreement in 8 scenarios: the upper end 2 alpha - mean + t s passes 1 and is capped;
    the lower end is 2 alpha - mean - t(7) s of the replicates (not their 2.5% quantile)."""
    rng = np.random.default_rng(12)
    pairs = _clustered_pairs(rng, 8)
    pairs["j"] = pairs["h"] + rng.normal(0, 0.01, len(pairs))
    pairs.loc[pairs["scenario_id"] == "sc-03", "j"] += 0.2  # one scenario disagrees: a skewed bootstrap
    row = _warehouse(tmp_path, pairs).query("SELECT * FROM judge_agreement").iloc[0]
    assert row["alpha_hi"] == 1.0
    pct = cluster_bootstrap_alpha(pairs["j"], pairs["h"], pairs["scenario_id"], interval="percentile")
    ref = cluster_bootstrap_alpha(pairs["j"], pairs["h"], pairs["scenario_id"])
    assert row["alpha_lo"] == pytest.approx(ref.low, rel=1e-9)
    assert pct.low is not None and abs(pct.low - row["alpha_lo"]) > 0.01

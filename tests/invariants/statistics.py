"""Property generators and predicates of docs/specs/statistics.md."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st

from eval_assets.gates import GateContext

if TYPE_CHECKING:
    import pandas as pd

    from eval_assets.stats import CheckSuiteEvidence

_Repeat = float | str


def _frame(scenarios: list[list[_Repeat]]) -> pd.DataFrame:
    import pandas as pd  # ~2 s CPU; `evaltrack validate` imports every gate module

    rows = []
    for i, repeats in enumerate(scenarios):
        for r, value in enumerate(repeats, start=1):
            scored = not isinstance(value, str)
            rows.append(
                {
                    "scenario_id": f"s{i:02d}",
                    "repeat": r,
                    "status": "scored" if scored else value,
                    "score": float(value) if scored else float("nan"),
                    "policy_failures": 0,
                }
            )
    return pd.DataFrame(rows)


def shuffled_verdicts(ctx: GateContext) -> st.SearchStrategy[tuple[pd.DataFrame, int]]:
    """(a verdict frame of 1-8 scenarios × 1-6 repeats, scored or failed/excluded, a shuffle seed)."""
    repeat: st.SearchStrategy[_Repeat] = st.one_of(
        st.floats(0.0, 1.0), st.sampled_from(["failed", "excluded"])
    )
    scenarios = st.lists(st.lists(repeat, min_size=1, max_size=6), min_size=1, max_size=8)
    return st.tuples(scenarios.map(_frame), st.integers(0, 2**32 - 1))


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def band_ignores_row_order(drawn: tuple[pd.DataFrame, int]) -> None:
    """noise_band gives the same figures for the same verdicts in any row order (a seeded shuffle)."""
    import numpy as np  # ~0.4 s CPU; `evaltrack validate` imports every gate module

    from eval_assets.stats import noise_band  # pandas and scipy: ~6 s CPU (as above)

    frame, seed = drawn
    order = np.random.default_rng(seed).permutation(len(frame))
    band = noise_band(frame)
    shuffled = noise_band(frame.iloc[order].reset_index(drop=True))
    for name in ("suite_mean", "suite_se", "half_width", "within_var", "between_var"):
        assert _same(getattr(band, name), getattr(shuffled, name)), (
            f"{name}: {getattr(band, name)} != {getattr(shuffled, name)}"
        )
    assert (band.n_scenarios, band.n_usable, band.n_repeats) == (
        shuffled.n_scenarios,
        shuffled.n_usable,
        shuffled.n_repeats,
    )
    assert band.unusable == shuffled.unusable and band.between_var_floored == shuffled.between_var_floored


def check_suites(ctx: GateContext) -> st.SearchStrategy[list[CheckSuiteEvidence]]:
    """0-4 check suites of 0-5 outcomes each, any of which may have failed."""
    from eval_assets.stats import CheckOutcome, CheckSuiteEvidence  # ~6 s CPU (as above)

    outcome = st.builds(CheckOutcome, st.sampled_from(["a", "b", "c", "d"]), st.booleans())
    suite = st.builds(
        CheckSuiteEvidence, st.sampled_from(["gates", "tests"]), st.lists(outcome, max_size=5).map(tuple)
    )
    return st.lists(suite, max_size=4)


def failed_check_blocks(suites: list[CheckSuiteEvidence]) -> None:
    """Any failed check blocks the release; otherwise no evidence, or a suite in which no check ran,
    decides nothing (fail closed: never allow on partial evidence); otherwise the checks allow."""
    from eval_assets.stats import decide  # ~6 s CPU (as above)

    decision = decide(suites).decision
    if any(not o.passed for s in suites for o in s.outcomes):
        assert decision == "block", decision
    elif not suites or any(not s.outcomes for s in suites):
        assert decision == "none", decision
    else:
        assert decision == "allow", decision

"""pass@k and pass^k (eval_assets.stats.reliability): definitions, fail-closed cases, and the report rows."""

from __future__ import annotations

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from eval_assets.stats import reliability

FLOOR = 0.6


def frame(rows: list[tuple[str, str, float | None, bool]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["scenario_id", "status", "score", "has_output"])


def test_pass_at_k_counts_one_pass_and_pass_hat_k_needs_every_repeat() -> None:
    figures = reliability(
        frame(
            [("a", "scored", 0.9, True), ("a", "scored", 0.2, True), ("a", "scored", 0.6, True)]
            + [("b", "scored", 0.7, True), ("b", "scored", 0.8, True), ("b", "scored", 0.61, True)]
            + [("c", "scored", 0.1, True), ("c", "failed", None, False), ("c", "scored", 0.59, True)]
        ),
        FLOOR,
        {"a": "s1", "b": "s1", "c": "s2"},
    )

    by = {(f.scope, f.name): (f.k, f.passed, f.of, f.pass_at_k, f.pass_hat_k) for f in figures}
    assert by[("scenario", "a")] == (3, 2, 3, 1.0, 0.0)  # the floor itself passes
    assert by[("scenario", "b")] == (3, 3, 3, 1.0, 1.0)
    assert by[("scenario", "c")] == (3, 0, 3, 0.0, 0.0)  # an attempt with no output did not pass
    assert by[("suite", "s1")] == (3, 1, 2, 1.0, 0.5)
    assert by[("suite", "s2")] == (3, 0, 1, 0.0, 0.0)


def test_an_excluded_scenario_is_left_out_never_counted_as_unsolved() -> None:
    figures = reliability(
        frame([("a", "excluded", None, True), ("a", "scored", 0.9, True), ("b", "scored", 0.9, True)]),
        FLOOR,
        {"a": "s", "b": "s"},
    )

    assert [(f.scope, f.name, f.of, f.pass_hat_k) for f in figures] == [("scenario", "b", 1, 1.0), ("suite", "s", 1, 1.0)]


def test_a_judge_failure_on_an_output_makes_the_figures_unknown_not_zero() -> None:
    figures = reliability(
        frame([("a", "failed", None, True), ("a", "scored", 0.9, True), ("b", "scored", 0.9, True)]),
        FLOOR,
        {"a": "s", "b": "s"},
    )

    by = {(f.scope, f.name): (f.pass_at_k, f.pass_hat_k) for f in figures}
    assert by[("scenario", "a")] == (None, None) and by[("suite", "s")] == (None, None)
    assert by[("scenario", "b")] == (1.0, 1.0)


REPEAT = st.tuples(
    st.sampled_from(["scored", "failed", "excluded"]), st.floats(0.0, 1.0), st.booleans()
)


@given(st.dictionaries(st.sampled_from("abcdef"), st.lists(REPEAT, min_size=1, max_size=6), max_size=6))
def test_suite_figures_are_the_share_of_known_scenarios_and_pass_hat_k_never_exceeds_pass_at_k(
    repeats: dict[str, list[tuple[str, float, bool]]],
) -> None:
    rows = [(sid, s, (x if s == "scored" else None), o) for sid, rs in repeats.items() for s, x, o in rs]
    suite_of = {sid: "even" if sid in "ace" else "odd" for sid in repeats}

    figures = reliability(frame(rows), FLOOR, suite_of)

    scenarios = [f for f in figures if f.scope == "scenario"]
    assert {f.name for f in scenarios} == {sid for sid, rs in repeats.items() if all(s != "excluded" for s, _, _ in rs)}
    for f in scenarios:
        if f.pass_at_k is not None and f.pass_hat_k is not None:
            assert f.pass_hat_k <= f.pass_at_k
            assert f.pass_at_k == float(f.passed > 0) and f.pass_hat_k == float(f.passed == f.k)
    for suite in (f for f in figures if f.scope == "suite"):
        members = [f for f in scenarios if suite_of[f.name] == suite.name]
        assert suite.of == len(members) > 0
        if any(m.pass_at_k is None for m in members):
            assert suite.pass_at_k is None and suite.pass_hat_k is None
        else:
            assert suite.pass_at_k == sum(m.pass_at_k or 0 for m in members) / len(members)
            assert suite.pass_hat_k == sum(m.pass_hat_k or 0 for m in members) / len(members)


@given(st.dictionaries(st.sampled_from("abcdefgh"), st.lists(REPEAT, min_size=1, max_size=6), max_size=8))
def test_each_scenario_s_figures_are_its_definition_over_its_own_repeats(
    repeats: dict[str, list[tuple[str, float, bool]]],
) -> None:
    """Per scenario, straight from the definitions: left out with an excluded repeat; `passed` the
    repeats scored at or above the floor; unknown when a repeat with output failed to be judged."""
    rows = [(sid, s, (x if s == "scored" else None), o) for sid, rs in repeats.items() for s, x, o in rs]
    figures = reliability(frame(rows), FLOOR, {})

    expected = []
    for sid in sorted(repeats):
        rs = repeats[sid]
        if any(s == "excluded" for s, _, _ in rs):
            continue
        passed = sum(1 for s, x, _ in rs if s == "scored" and x >= FLOOR)
        known = not any(s == "failed" and o for s, _, o in rs)
        k = len(rs)
        expected.append(
            (sid, k, passed, k, float(passed > 0) if known else None, float(passed == k) if known else None)
        )
    got = [(f.name, f.k, f.passed, f.of, f.pass_at_k, f.pass_hat_k) for f in figures if f.scope == "scenario"]
    assert got == expected

"""pass@k and pass^k (eval_assets.stats.reliability): definitions, fail-closed cases, and the report rows."""

from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
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


def test_a_judge_failure_on_an_output_is_unknown_never_a_pass_or_a_failure() -> None:
    """3 passes and 2 repeats the judge could not score: solved at least once (pass@5 = 1), but whether
    every repeat passed is unknown; one scored failure beside the unknown ones settles pass^k at 0."""
    figures = reliability(
        frame(
            [("a", "scored", 0.9, True)] * 3
            + [("a", "failed", None, True)] * 2
            + [("b", "scored", 0.9, True), ("b", "failed", None, True), ("b", "scored", 0.1, True)]
            + [("c", "failed", None, True), ("c", "scored", 0.1, True)]
        ),
        FLOOR,
        {"a": "s", "b": "s", "c": "t"},
    )

    by = {(f.scope, f.name): (f.k, f.passed, f.unknown, f.pass_at_k, f.pass_hat_k) for f in figures}
    assert by[("scenario", "a")] == (5, 3, 2, 1.0, None)
    assert by[("scenario", "b")] == (3, 1, 1, 1.0, 0.0)
    assert by[("scenario", "c")] == (2, 0, 1, None, 0.0)
    assert by[("suite", "s")][3:] == (1.0, None) and by[("suite", "t")][3:] == (None, 0.0)


REPEAT = st.tuples(
    st.sampled_from(["scored", "failed", "excluded"]), st.floats(0.0, 1.0), st.booleans()
)


@settings(deadline=None)  # a pandas groupby per example: slow on a busy machine, not wrong
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
    for suite in (f for f in figures if f.scope == "suite"):
        members = [f for f in scenarios if suite_of[f.name] == suite.name]
        assert suite.of == len(members) > 0
        for value, of in (
            (suite.pass_at_k, [m.pass_at_k for m in members]),
            (suite.pass_hat_k, [m.pass_hat_k for m in members]),
        ):
            if any(m is None for m in of):
                assert value is None
            else:
                assert value == sum(m or 0 for m in of) / len(members)


@settings(deadline=None)
@given(st.dictionaries(st.sampled_from("abcdefgh"), st.lists(REPEAT, min_size=1, max_size=6), max_size=8))
def test_each_scenario_s_figures_are_its_definition_over_its_own_repeats(
    repeats: dict[str, list[tuple[str, float, bool]]],
) -> None:
    """Per scenario, straight from the definitions: left out with an excluded repeat; `passed` the
    repeats scored at or above the floor; a repeat with output the judge failed to score is unknown, so
    pass@k is unknown only when nothing passed and pass^k only when nothing failed."""
    rows = [(sid, s, (x if s == "scored" else None), o) for sid, rs in repeats.items() for s, x, o in rs]
    figures = reliability(frame(rows), FLOOR, {})

    expected = []
    for sid in sorted(repeats):
        rs = repeats[sid]
        if any(s == "excluded" for s, _, _ in rs):
            continue
        passed = sum(1 for s, x, _ in rs if s == "scored" and x >= FLOOR)
        unknown = sum(1 for s, _, o in rs if s == "failed" and o)
        failed = len(rs) - passed - unknown
        k = len(rs)
        at = 1.0 if passed else (None if unknown else 0.0)
        hat = 0.0 if failed else (None if unknown else 1.0)
        expected.append((sid, k, passed, k, at, hat))
    got = [(f.name, f.k, f.passed, f.of, f.pass_at_k, f.pass_hat_k) for f in figures if f.scope == "scenario"]
    assert got == expected

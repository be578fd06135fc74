"""Adaptive repeats: which scenarios a candidate tops up after its first look (docs/methods.md).

A candidate build runs every scenario at `AdaptiveDesign.start` repeats, then looks: it runs the
report's own rules (`_rules.evaluate`) on those repeats against the baseline, and tops up to
`AdaptiveDesign.maximum` repeats only the scenarios whose comparison is still uncertain. The error
budget holds across the two looks by an alpha-spending rule (Lan & DeMets 1983, O'Brien-Fleming
type): the first look may spend `obrien_fleming_spent(t)` of alpha, t = start / maximum the share of
the repeats it sees, and every p-value the rules act on becomes min(p1 / w1, p2 / w2) (`_rules.Looks`).
The engine (`capability.materialize`) and the calibration benchmark both call `plan_top_ups`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Final

import numpy as np
from scipy import stats

from ._rules import BinaryTest, Budget, Concentrated, Looks, Moments, chi_bar_sf, evaluate

FUTILITY: Final = 0.04
"""A scenario whose first-look drop p (and floor-test p) is above this stops on its own account: its
own tests (at alpha x 0.1 / m for the drop) could not be reached by two more repeats, and stopping a
scenario only lowers the error. The suite's tests are served by the two screens below, which top up
every scenario. Above the exact p of a total separation at 3 against 5 repeats (1/56 = 0.018), so a
collapsed scenario is always topped up. Set just that low: the attempts it saves on unchanged builds
pay for the wider concentrated-drop screen (`TAIL_FUTILITY`)."""

SUITE_FUTILITY: Final = 0.15
"""The suite's first-look test of a mean drop beyond the noise band: at or below this, every scenario is
topped up, since the mean test needs every scenario's repeats (an unchanged build's mean is about two
standard errors above the band, so this rarely costs anything there). No band condition of the
calibration benchmark loses power beyond Monte Carlo error at this bound, and a looser one opens the
test in many unchanged rebuilds' reports of a small suite, topping up every scenario of each."""

COLLAPSE_FUTILITY: Final = 0.1
"""A scenario whose first look has not met the collapse rule's condition but could still meet it at the
maximum (`collapse_reachable`) is topped up when its first-look drop p is at most this. Above
`FUTILITY`, because a collapsed scenario whose first repeats happen to score above the floor (0.25 three
times on a 5-level rubric, against a baseline at 0.45) has a first-look drop p of 0.06-0.08 and would
otherwise stop before the repeats that show the collapse (docs/methods.md, "Adaptive repeats")."""

TAIL_FUTILITY: Final = 0.25
"""The first-look concentrated-drop screen (`tail_screen`): at or below this, every scenario is topped
up, so the concentrated test's second look sees the repeats the fixed design would have (topping up only
the scenarios that dropped recovers none of the power: the others, left at 3 repeats, carry the test's
centre and its variance prior). With the bounds above, no calibration benchmark cell loses power beyond
Monte Carlo error; a larger bound costs the example suite its saving, and the other screens tried (the
test's own p, a null simulated from the baseline, conditional power) did no better (docs/methods.md,
"Adaptive repeats")."""


@dataclass(frozen=True)
class AdaptiveDesign:
    """Start every scenario at `start` repeats; top up the uncertain ones to `maximum`."""

    start: int = 3
    maximum: int = 5
    futility: float = FUTILITY
    suite_futility: float = SUITE_FUTILITY
    tail_futility: float = TAIL_FUTILITY
    collapse_futility: float = COLLAPSE_FUTILITY

    def __post_init__(self) -> None:
        if not 2 <= self.start < self.maximum:
            raise ValueError(
                f"adaptive repeats need 2 <= start < maximum, not start {self.start}, maximum {self.maximum}"
            )
        for name in ("futility", "suite_futility", "tail_futility", "collapse_futility"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ValueError(f"the {name} bound must be in (0, 1), not {getattr(self, name)}")

    @property
    def information(self) -> float:
        """The share of the repeats the first look sees (the spending function's time)."""
        return self.start / self.maximum

    def shares(self, alpha: float) -> tuple[float, float]:
        """(w1, w2): the shares of `alpha` the two looks spend (O'Brien-Fleming-type spending)."""
        first = obrien_fleming_spent(self.information, alpha) / alpha
        return first, 1.0 - first

    def looks(self, interim: Moments, topped: np.ndarray, budget: Budget) -> Looks:
        """The `_rules.Looks` of a candidate topped up after its first look under this design.

        The spending function is evaluated at the level of the family's least-weighted class of
        hypotheses, alpha x w_floor (0.0025 at one judge version): an O'Brien-Fleming boundary spends
        less early at a smaller alpha, so no hypothesis gives its first look more than the function
        would at its own level (the first look's tests on 3 repeats are the least trustworthy)."""
        shares = self.shares(budget.report_alpha * budget.w_floor)
        return Looks(interim, np.asarray(topped, dtype=bool), shares)


def obrien_fleming_spent(t: float, alpha: float) -> float:
    """Alpha spent by information time t in (0, 1]: 2 (1 - Phi(z_{1 - alpha/2} / sqrt t)) (Lan & DeMets
    1983, the O'Brien-Fleming-type function): little early, all of alpha at t = 1."""
    if not 0.0 < t <= 1.0:
        raise ValueError(f"information time must be in (0, 1], not {t}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), not {alpha}")
    return float(2.0 * stats.norm.sf(stats.norm.isf(alpha / 2.0) / np.sqrt(t)))


def tail_screen(conc: Concentrated) -> np.ndarray:
    """(R,) the first look's concentrated-drop p with the scenarios whose centred score is exactly 0 left
    out of its chi-bar count: on coarse scores at the start's few repeats many scenarios tie with the
    median, each adding a sure 0 to the statistic, and the test's own p sits near 1 whatever the
    candidate did. A screen only (it decides what is paid, never what is significant)."""
    u = np.nan_to_num(conc.u)
    moved = (np.isfinite(conc.u) & (np.abs(u) > 1e-9)).sum(axis=1)
    return chi_bar_sf(conc.statistic, moved)


def collapse_reachable(base: Moments, interim: Moments, floor: float | None, remaining: int) -> np.ndarray:
    """(R, m) bool: the collapse rule's condition (`_rules._floor_tests`: the candidate's mean below the
    floor, or most of its repeats and at least 3, where the baseline's was not) could still hold once
    `remaining` more repeats are scored, if each of them scored 0 (the least a score can be), though it
    may not hold on the first look's repeats yet."""
    if floor is None:
        return np.zeros(interim.n.shape, dtype=bool)
    n_b, n_c = np.nan_to_num(base.n), np.nan_to_num(interim.n)
    below_b, below_c = np.nan_to_num(base.below), np.nan_to_num(interim.below)
    total = n_c + remaining
    with np.errstate(invalid="ignore"):
        base_above = (base.mean >= floor) & (below_b <= n_b / 2.0)
        mean_can_fall = np.nan_to_num(interim.mean) * n_c / total < floor
        most_can_fall = (below_c + remaining > total / 2.0) & (below_c + remaining >= 3)
    return np.asarray((n_b >= 1) & base_above & (mean_can_fall | most_can_fall))


@dataclass(frozen=True)
class TopUps:
    """The first look's plan, (R, m) arrays: `repeats` more attempts per scenario (0 or
    maximum - start), and why: `blocked` (R,) the report already blocks on the first look alone (no
    top-up can change that), `uncertain` the scenarios whose comparison is still open."""

    repeats: np.ndarray
    blocked: np.ndarray
    uncertain: np.ndarray


def plan_top_ups(
    base: Moments,
    interim: Moments,
    floor: float | None,
    budget: Budget,
    design: AdaptiveDesign,
    *,
    between: float = 0.0,
    between_df: int = 0,
    level: float = 0.95,
    binary_test: BinaryTest = "fisher",
) -> TopUps:
    """Which scenarios to top up after the first look, and by how many repeats.

    `base` is the baseline's scored repeats, `interim` the candidate's first `design.start` repeats,
    (R, m) moments over the same scenarios. A scenario is topped up when its comparison is uncertain:
    its first-look drop p (moderated t, or Fisher on pass/fail repeats) or its floor-test p is at most
    `design.futility`, or its first-look mean is below the floor where the baseline's was not (the
    collapse rule's condition), or that condition is still reachable at the maximum
    (`collapse_reachable`) and its first-look drop p is at most `design.collapse_futility`, or the
    candidate could not be tested in it yet while the baseline scored it.
    Every scenario is topped up when a suite test is uncertain: the first-look mean drop beyond the
    band has p at most `design.suite_futility`, or the concentrated-drop screen (`tail_screen`) is at
    most `design.tail_futility`. A scenario the baseline never scored cannot be compared at any count:
    it is never topped up. Nothing is topped up in a replication whose report already blocks on the
    first look with its spent share of alpha (the rules are monotone in the p-values: more repeats
    cannot undo that block). Pure: the same moments give the same plan, so a re-run after a crash plans the
    same top-ups from the same reused verdicts.
    """
    nothing = np.zeros(interim.n.shape, dtype=bool)
    first_look = functools.partial(
        evaluate,
        base,
        interim,
        floor,
        budget,
        between=between,
        between_df=between_df,
        level=level,
        binary_test=binary_test,
    )
    looked = first_look(looks=design.looks(interim, nothing, budget))  # the block the report would see
    raw = first_look()  # the uncorrected p-values the screens read
    with np.errstate(invalid="ignore"):
        # a scenario the candidate could not be tested in yet (no scored repeat, or one) is open while
        # the baseline scored it; one the baseline never scored cannot be compared at any count
        untested = ~np.isfinite(raw.tests.p_drop) & (np.nan_to_num(base.n) >= 1)
        open_drop = (raw.tests.p_drop <= design.futility) | untested
        open_floor = np.isfinite(raw.tests.p_floor) & (raw.tests.p_floor <= design.futility)
        # a scenario whose first-look mean is below the floor where the baseline's was not: the collapse
        # rule's own condition, whatever its p (0 of 3 passes against 4 of 5 has Fisher p 0.071)
        open_collapse = np.asarray(raw.tests.collapse, dtype=bool)
        # ... or one that could still meet it at the maximum, with a small first-look drop p (a collapsed
        # scenario whose first repeats happen to score above the floor)
        reachable = collapse_reachable(base, interim, floor, design.maximum - design.start)
        open_collapse |= reachable & (np.nan_to_num(raw.tests.p_drop, nan=1.0) <= design.collapse_futility)
        # the suite's mean may be beyond the noise band: every scenario carries that test
        open_suite = raw.p_beyond <= design.suite_futility
        # a concentrated drop may be under way: its test at the second look needs every scenario's
        # repeats (the median it is centred on moves with each scenario left at the start)
        open_tail = tail_screen(raw.concentrated) <= design.tail_futility
        comparable = np.nan_to_num(base.n) >= 1
    uncertain = np.asarray(
        open_drop | open_floor | open_collapse | ((open_suite | open_tail)[:, None] & comparable)
    )
    blocked = np.asarray(looked.block)
    top = uncertain & ~blocked[:, None]
    return TopUps(np.where(top, design.maximum - design.start, 0), blocked, uncertain)

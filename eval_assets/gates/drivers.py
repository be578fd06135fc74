"""The standard drivers for corpus, property and case gates (named as `check:` in the registry).

The runner enforces each kind's floors around whichever driver a gate names: a corpus below
`minimum_members` fails before the driver runs; a property driver must report `trials` and fewer
than `min_trials` fails; a converted case without assertions never reaches the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.errors import Flaky, Unsatisfiable

from eval_assets.home import EvalHome, default_home

from ._cases import CaseError, case_outcome, load_case
from ._outcome import GateContext, GateFailed, Outcome

MAX_REPR = 300


class _Falsified(AssertionError):
    """Raised inside the hypothesis test when the predicate rejects a value."""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_REPR else text[:MAX_REPR] + f"... [{len(text) - MAX_REPR} chars cut]"


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def each_member(ctx: GateContext) -> Outcome:
    """Apply `ctx.procedure(member, ctx)` to every corpus member; every member must be accepted.

    The procedure accepts a member by returning None or True, or an empty list; it rejects it by
    returning False, a message, a non-empty list of messages, or raising `GateFailed`. Any other
    exception is re-raised naming the member (the gate is then `error`).
    """
    if ctx.procedure is None:
        raise TypeError("each_member needs a corpus gate (no procedure in the context)")
    findings: list[str] = []
    for member in ctx.members:
        shown = _relative(member, ctx.root)
        try:
            verdict = ctx.procedure(member, ctx)
        except GateFailed as exc:
            findings.append(f"{shown}: {exc}")
            continue
        except Exception as exc:
            raise RuntimeError(f"procedure raised on {shown}: {type(exc).__name__}: {exc}") from exc
        if verdict is None or verdict is True:
            continue
        if verdict is False:
            findings.append(f"{shown}: rejected")
        elif isinstance(verdict, str):
            findings.append(f"{shown}: {verdict}")
        else:
            findings += [f"{shown}: {line}" for line in verdict]
    n = len(ctx.members)
    if findings:
        failed = len({f.split(": ", 1)[0] for f in findings})
        return Outcome.failed(f"{failed} of {n} member(s) failed", findings, members=n)
    return Outcome.ok(f"all {n} member(s) pass", members=n)


def for_all(ctx: GateContext) -> Outcome:
    """Run `ctx.predicate` over `ctx.min_trials` values drawn from `ctx.generator(ctx)` with hypothesis.

    Settings: `max_examples=min_trials, database=None, derandomize=True` (the same draws every run),
    no deadline, quiet. The predicate fails a value by returning False or raising; the outcome then
    carries the (shrunk) counterexample. Reports the number of trials that ran; running out of
    distinct values before `min_trials` is reported as such (the runner fails it).
    """
    if ctx.generator is None or ctx.predicate is None:
        raise TypeError("for_all needs a property gate (no generator/predicate in the context)")
    return _draw(ctx, ctx.generator, ctx.predicate)


def _draw(ctx: GateContext, generator: Callable[..., Any], predicate: Callable[..., Any]) -> Outcome:
    # hypothesis keeps caches (its charmap, the constants it collects from code) under ./.hypothesis
    # of the working directory even with database=None: keep them in EVAL_HOME, never in the checkout
    set_hypothesis_home_dir(EvalHome(default_home()).hypothesis)
    strategy = generator(ctx)
    trials = 0
    last_failure: list[str] = []

    def trial(value: Any) -> None:
        nonlocal trials
        trials += 1
        try:
            held = predicate(value)
        except Exception as exc:
            last_failure[:] = [f"{_short(value)}: {type(exc).__name__}: {exc}"]
            raise _Falsified(last_failure[0]) from exc
        if held is False:
            last_failure[:] = [f"{_short(value)}: predicate returned False"]
            raise _Falsified(last_failure[0])

    run = settings(
        max_examples=ctx.min_trials,
        database=None,
        derandomize=True,
        deadline=None,
        verbosity=Verbosity.quiet,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        suppress_health_check=[HealthCheck.too_slow],
    )(given(strategy)(trial))
    try:
        run()
    except _Falsified:
        return Outcome.failed(f"falsified: {last_failure[0]}", last_failure, trials=trials)
    except Flaky:
        return Outcome.failed(f"the predicate is not deterministic: {last_failure[:1]}", trials=trials)
    except Unsatisfiable:
        return Outcome.failed(f"the generator could not produce {ctx.min_trials} values", trials=trials)
    except BaseExceptionGroup as group:
        if all(isinstance(e, _Falsified) for e in group.exceptions):
            return Outcome.failed(f"falsified: {'; '.join(str(e) for e in group.exceptions)}", trials=trials)
        raise
    return Outcome.ok(f"{trials} trial(s) hold", trials=trials)


def run_case(ctx: GateContext) -> Outcome:
    """Load the case at `ctx.case_path` and run it on the sim provider; passes when its assertions hold."""
    if ctx.case_path is None:
        raise TypeError("run_case needs a case gate (no case path in the context)")
    case, problems = load_case(ctx.case_path)
    if case is None:
        raise CaseError(f"case file {_relative(ctx.case_path, ctx.root)} is invalid: {'; '.join(problems)}")
    return case_outcome(case, ctx)

"""The standard drivers for corpus, property and case gates (named as `check:` in the registry).

The runner enforces each kind's floors around whichever driver a gate names: a corpus below
`minimum_members` fails before the driver runs; a property driver must report `trials` and fewer
than `min_trials` fails; a converted case without assertions never reaches the driver.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.errors import Flaky, Unsatisfiable

from eval_assets.home import default_home

from ._cases import CaseError, case_outcome, load_case
from ._digest import files_digest
from ._outcome import GateContext, GateFailed, Outcome
from ._scratch import fresh_interpreter

MAX_REPR = 300
PACKAGE = Path(__file__).resolve().parents[1]  # the eval_assets package this process runs
CONFIG = ("scenarios", "rubrics", "judges", "gates", "evaltrack.yaml")  # the project a gate may read


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


# A property gate or tree-only check that held, per (gate, its callables, root, digest of the code and
# the project it ran on). With `derandomize=True` a property gate's draws are a function of the code
# alone, and a `tree_only` check reads nothing but the tree: over an unchanged tree either holds again
# for the very same reasons. The demo and a daemon run the suite once per build in one process; the four
# shipped property gates cost ~3.5 s of CPU per build, the canary materialization ~1 s.
# Any changed, added or removed source or configuration file changes the digest and the gate runs
# again; a gate that failed always runs again; a generator or predicate outside eval_assets (whose
# source the digest does not cover) is never reused. The installed packages do not change under a
# process.
_HELD: dict[tuple[str, ...], Outcome] = {}


# The gates run ahead, per resolved root: `start_ahead` draws every property gate of the registry in a
# fresh interpreter (the same package, the same derandomized draws) while the caller materializes a
# build's other steps; `for_all` takes the outcomes that held from there, under the very keys it would
# have stored itself (their digest is the child's: a tree edited since gives other keys, which are then
# drawn here). A failed, crashed or missing child changes nothing: the gate draws here. Tree-only checks
# are not run there: the canary's materialization costs ~1 s in a process that has the track imported,
# and several seconds of imports in a fresh one, which on two cores slowed the first build's runs more
# than it saved (`benchmarks/demo.py`, 2026-12-05).
_AHEAD: dict[str, Future[dict[tuple[str, ...], Outcome]]] = {}

_RUN_AHEAD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from eval_assets.gates import drivers, load_registry, run_suite
root = Path(sys.argv[2])
registry = load_registry(root)
top = max((g.milestone for g in registry.gates), default=0)
run_suite(registry, milestone=top, root=root, kinds={"property"}, converted_glob=None)
held = [[list(key), o.message, list(o.findings), o.trials, o.members] for key, o in drivers._HELD.items()]
print(json.dumps(held))
"""


def start_ahead(root: Path) -> None:
    """Start drawing every property gate of the registry under `root` in a fresh interpreter, in the
    background, unless this root is drawn (or being drawn) ahead in this process already; `for_all`
    then takes the outcomes that held instead of drawing them. For a command that runs the suite in
    this process after other work (`evaltrack run`, `demo`): the draws run on another core meanwhile."""
    root = root.resolve()
    if str(root) in _AHEAD:
        return
    future: Future[dict[tuple[str, ...], Outcome]] = Future()

    def run() -> None:
        try:
            proc = fresh_interpreter(_RUN_AHEAD, [str(PACKAGE.parent), str(root)], root, check=True)
            held = {
                tuple(key): Outcome(True, message, tuple(findings), trials, members)
                for key, message, findings, trials, members in json.loads(proc.stdout.splitlines()[-1])
            }
            future.set_result(held)
        except BaseException as exc:  # taken as nothing run ahead: the gates run themselves
            future.set_exception(exc)

    # a daemon thread: a command that ends before its suite runs does not wait for the child
    threading.Thread(target=run, name="gates-ahead", daemon=True).start()
    _AHEAD[str(root)] = future


def _take_ahead(root: str) -> None:
    """Wait for the gates started ahead for `root`, if any, and keep the outcomes that held."""
    future = _AHEAD.get(root)
    if future is None:
        return
    try:
        _HELD.update(future.result())
    except Exception:  # a child that failed leaves each gate to run here
        pass


def _held_or_run(key: tuple[str, ...], root: str, run: Callable[[], Outcome]) -> Outcome:
    """The outcome held under `key` (taken from the gates run ahead for `root` if need be), else `run()`,
    kept when it passed."""
    if key not in _HELD:
        _take_ahead(root)
    if key in _HELD:
        return _HELD[key]
    outcome = run()
    if outcome.passed:
        _HELD[key] = outcome
    return outcome


def tree_only(check: Callable[[GateContext], Outcome]) -> Callable[[GateContext], Outcome]:
    """Declare a check whose outcome is a function of the source tree and the project's configuration
    alone (what `_tree_digest` covers), never of the build: over an unchanged tree a pass holds again
    without running (`_HELD`), so a command that decides several builds runs it once. A context with
    hooks or extra scan paths (a recording run, a test's seams) always runs it."""

    @functools.wraps(check)
    def held_or_checked(ctx: GateContext) -> Outcome:
        if ctx.hooks or ctx.extra_scan_paths:
            return check(ctx)
        root = str(ctx.root.resolve())
        key = (ctx.gate_id, _callable_name(check), root, _tree_digest(ctx.root))
        return _held_or_run(key, root, lambda: check(ctx))

    return held_or_checked


def _callable_name(fn: Any) -> str:
    return f"{getattr(fn, '__module__', '')}:{getattr(fn, '__qualname__', repr(fn))}"


def _tree_digest(root: Path) -> str:
    """The digest of every .py file of the running eval_assets package and every file of the project's
    configuration under `root` (`CONFIG`), in path order."""
    files = [(PACKAGE.parent, p) for p in sorted(PACKAGE.rglob("*.py"))]
    for name in CONFIG:
        top = root / name
        found = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        files += [(root, p) for p in found]
    return files_digest(files)


def for_all(ctx: GateContext) -> Outcome:
    """Run `ctx.predicate` over `ctx.min_trials` values drawn from `ctx.generator(ctx)` with hypothesis.

    Settings: `max_examples=min_trials, database=None, derandomize=True` (the same draws every run),
    no deadline, quiet. The predicate fails a value by returning False or raising; the outcome then
    carries the (shrunk) counterexample. Reports the number of trials that ran; running out of
    distinct values before `min_trials` is reported as such (the runner fails it). A gate that held
    over the same code and project earlier in this process holds again without drawing (`_HELD`).
    """
    if ctx.generator is None or ctx.predicate is None:
        raise TypeError("for_all needs a property gate (no generator/predicate in the context)")
    names = (_callable_name(ctx.generator), _callable_name(ctx.predicate))
    if not all(n.startswith(f"{PACKAGE.name}.") for n in names):  # source the digest does not cover
        return _draw(ctx, ctx.generator, ctx.predicate)
    root = str(ctx.root.resolve())
    key = (ctx.gate_id, *names, str(ctx.min_trials), root, _tree_digest(ctx.root))
    generator, predicate = ctx.generator, ctx.predicate
    return _held_or_run(key, root, lambda: _draw(ctx, generator, predicate))


def _draw(ctx: GateContext, generator: Callable[..., Any], predicate: Callable[..., Any]) -> Outcome:
    # hypothesis keeps caches (its charmap, the constants it collects from code) under ./.hypothesis
    # of the working directory even with database=None: keep them in EVAL_HOME, never in the checkout
    set_hypothesis_home_dir(default_home() / "hypothesis")
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

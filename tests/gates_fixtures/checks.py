"""Callables named by the gate tests' registries: each behaves in one documented way.

`SCRIPT` drives `scripted`: a test puts the outcomes it wants, in order, under the check's id
(True pass, False fail); `CALLS` records every call, so a test can see that a check ran; `DRAWN`
records every value the `records*` predicates saw, so a test can compare two runs' draws.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from hypothesis import strategies as st

from eval_assets.gates import GateContext, GateFailed, Outcome, Skip

SCRIPT: dict[str, list[bool]] = defaultdict(list)
CALLS: list[str] = []
DRAWN: list[object] = []  # every value a recording predicate was called with, in order


def passes(ctx: GateContext) -> None:
    CALLS.append(ctx.gate_id)


def finds_two(ctx: GateContext) -> list[str]:
    CALLS.append(ctx.gate_id)
    return ["first finding", "second finding"]


def raises(ctx: GateContext) -> None:
    CALLS.append(ctx.gate_id)
    raise RuntimeError("the check blew up")


def raises_skip(ctx: GateContext) -> None:
    CALLS.append(ctx.gate_id)
    raise Skip("not today")


def returns_skip(ctx: GateContext) -> Skip:
    CALLS.append(ctx.gate_id)
    return Skip("not today either")


def scripted(ctx: GateContext) -> None:
    """Pass or fail as SCRIPT[ctx.gate_id] says next (pass once the script runs out)."""
    CALLS.append(ctx.gate_id)
    script = SCRIPT[ctx.gate_id]
    if script and not script.pop(0):
        raise GateFailed("scripted failure")


def member_is_nonempty(member: Path, ctx: GateContext) -> str | None:
    return None if member.read_text(encoding="utf-8").strip() else "empty file"


def integers(ctx: GateContext) -> st.SearchStrategy[int]:
    return st.integers(-(10**6), 10**6)


def booleans(ctx: GateContext) -> st.SearchStrategy[bool]:
    return st.booleans()  # only two distinct values: hypothesis stops long before 50 trials


def is_int(value: object) -> bool:
    return isinstance(value, int)


def is_small(value: int) -> None:
    assert abs(value) < 1000, f"{value} is not small"


def records(value: object) -> bool:
    DRAWN.append(value)
    return True


def records_and_is_small(value: int) -> None:
    DRAWN.append(value)
    is_small(value)


def driver_without_trial_count(ctx: GateContext) -> Outcome:
    return Outcome.ok("ran something, counted nothing")

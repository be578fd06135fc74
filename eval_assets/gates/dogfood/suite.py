"""The structural gate of docs/specs/deterministic-suite.md: the registry is valid and matches the specs."""

from __future__ import annotations

from eval_assets.gates._docs import validate_gates
from eval_assets.gates._outcome import GateContext, Outcome


def registry_matches_specs(ctx: GateContext) -> Outcome:
    """`gates/` validates (fields, kinds, unique ids, importable callables, case files) and every
    spec's Hard gates section lists exactly the registry's gates for it: what `evaltrack validate`
    reports for gates, as a gate, so a dropped gate blocks the build and not only the docs build."""
    problems = validate_gates(ctx.root)
    if problems:
        return Outcome.failed(f"{len(problems)} registry/docs problem(s)", [str(p) for p in problems])
    return Outcome.ok("registry valid; every spec's Hard gates section matches it")

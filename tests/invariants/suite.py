"""Checks of docs/specs/deterministic-suite.md: the registry is valid and matches the specs; the sim
provider the suite's case and property gates rest on is deterministic. Run by the test command."""

from __future__ import annotations

import asyncio

from eval_assets.gates import GateContext, GateFailed, Outcome, validate_gates


def registry_matches_specs(ctx: GateContext) -> Outcome:
    """`gates/` validates (fields, kinds, unique ids, importable callables, case files) and every
    spec's Hard gates section lists exactly the registry's gates for it: what `evaltrack validate`
    reports for gates, as a gate, so a dropped gate blocks the build and not only the docs build."""
    problems = validate_gates(ctx.root)
    if problems:
        return Outcome.failed(f"{len(problems)} registry/docs problem(s)", [str(p) for p in problems])
    return Outcome.ok("registry valid; every spec's Hard gates section matches it")


def sim_provider_is_deterministic(ctx: GateContext) -> None:
    """The same sim call (model, knobs, identity) twice through litellm gives the same text."""
    # the gateway (~0.2 s of CPU, litellm ~3 s more at its first call); validate imports gates
    from eval_assets.providers.gateway import CallSpec, ModelGateway

    gateway = ModelGateway({"sim/agent": (3e-6, 15e-6)})
    spec = CallSpec(
        model="sim/agent",
        messages=[{"role": "user", "content": "Say something."}],
        max_tokens=64,
        timeout_s=30.0,
        params={"skill": 0.6, "noise": 0.2, "seed": 5},
        metadata={"build": "determinism", "scenario_id": "probe", "repeat": 1, "try_no": 1},
    )
    first, second = asyncio.run(gateway.call(spec)), asyncio.run(gateway.call(spec))
    if not (first.ok and second.ok):
        raise GateFailed(f"sim call failed: {first.error or second.error}")
    if first.text != second.text:
        raise GateFailed(f"two identical sim calls differ: {first.text!r} vs {second.text!r}")

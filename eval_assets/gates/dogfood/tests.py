"""Ordinary (non-gate) tests of the deterministic suite, declared in gates/tests.yaml.

They are retried once on failure and may be quarantined (METHODS §8); they never block as gates do.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from eval_assets.gates._outcome import GateContext, GateFailed


def sim_provider_is_deterministic(ctx: GateContext) -> None:
    """The same sim call (model, knobs, identity) twice through litellm gives the same text."""
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


def warehouse_round_trip(ctx: GateContext) -> None:
    """A partition written by the one partition writer reads back unchanged from its file."""
    import duckdb

    from eval_assets.warehouse import Dataset, Warehouse

    probe = Dataset("probe", ("build",), (("build", "VARCHAR"), ("n", "INTEGER"), ("text", "VARCHAR")))
    rows = [{"build": "b1", "n": i, "text": f"row {i} ünïcode"} for i in range(5)]
    with tempfile.TemporaryDirectory(prefix="evaltrack-roundtrip-") as tmp:
        path = Warehouse(Path(tmp), {"probe": probe}).write_partition("probe", {"build": "b1"}, rows, "run-1")
        con = duckdb.connect()
        try:
            back = con.execute(
                "SELECT build, n, text FROM read_parquet(?) ORDER BY n", [str(path)]
            ).fetchall()
        finally:
            con.close()
    if back != [(r["build"], r["n"], r["text"]) for r in rows]:
        raise GateFailed(f"read back {back!r}, wrote {rows!r}")

"""The one partition writer's round trip, checked by the test command."""

from __future__ import annotations

import tempfile
from pathlib import Path

from eval_assets.gates import GateContext, GateFailed


def warehouse_round_trip(ctx: GateContext) -> None:
    """A partition written by the one partition writer reads back unchanged from its file."""
    import duckdb  # ~0.25 s CPU; `evaltrack validate` imports every gate module

    from eval_assets.warehouse import (  # duckdb and pandas: ~2 s CPU (as above)
        Dataset,
        Warehouse,
        literal_path,
    )

    probe = Dataset("probe", ("build",), (("build", "VARCHAR"), ("n", "INTEGER"), ("text", "VARCHAR")))
    rows = [{"build": "b1", "n": i, "text": f"row {i} ünïcode"} for i in range(5)]
    with tempfile.TemporaryDirectory(prefix="evaltrack-roundtrip-") as tmp:
        path = Warehouse(Path(tmp), {"probe": probe}).write_partition("probe", {"build": "b1"}, rows, "run-1")
        con = duckdb.connect()
        try:
            back = con.execute(
                "SELECT build, n, text FROM read_parquet(?) ORDER BY n", [literal_path(path)]
            ).fetchall()
        finally:
            con.close()
    if back != [(r["build"], r["n"], r["text"]) for r in rows]:
        raise GateFailed(f"read back {back!r}, wrote {rows!r}")

"""An analyst in a separate process: holds warehouse.duckdb read-only open and polls a view.

Usage: analyst_reader.py CATALOG BUILD WORKDIR. Writes WORKDIR/ready once connected, polls until
WORKDIR/stop exists, then polls once more and writes WORKDIR/observations.json:
a list of {run_ids: [...], rows: n} per poll, plus any error text.
"""

import json
import sys
from pathlib import Path

import duckdb

catalog, build, workdir = sys.argv[1], sys.argv[2], Path(sys.argv[3])
con = duckdb.connect(catalog, read_only=True)
sql = "SELECT run_id, count(*) FROM scenario_runs WHERE build = ? GROUP BY run_id ORDER BY run_id"
observations, errors = [], []


def poll() -> None:
    try:
        rows = con.execute(sql, [build]).fetchall()
        observations.append({"run_ids": [r[0] for r in rows], "rows": sum(r[1] for r in rows)})
    except duckdb.Error as exc:
        errors.append(str(exc))


(workdir / "ready").write_text("connected")
while not (workdir / "stop").exists():
    poll()
poll()  # after the writer finished: must see the new partition without reconnecting
con.close()
(workdir / "observations.json").write_text(json.dumps({"observations": observations, "errors": errors}))

"""The one place a benchmark's measurements go: `benchmarks/results/<name>.json`, with the machine, the load,
the commit and the command beside the figures, so the docs render their measured tables from data
(`scripts/render_results`) instead of restating a run by hand.

    recording = Recording("suite")          # at the start: the load before the run is part of the record
    ...
    recording.table("per_build", rows)      # rows: a list of dicts, one column per key
    recording.figure("ratio", 0.93)
    recording.write()                       # or write(out) when the caller chose another path
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cores": os.cpu_count(),
    }


class Recording:
    """One run of one benchmark: what it measured and under which conditions."""

    def __init__(self, name: str, argv: list[str] | None = None) -> None:
        self.name = name
        self.argv = list(sys.argv if argv is None else argv)
        self.started_at = dt.datetime.now(dt.UTC)
        self.load_before = list(os.getloadavg())
        self.figures: dict[str, Any] = {}
        self.tables: dict[str, list[dict[str, Any]]] = {}

    def figure(self, key: str, value: Any) -> None:
        self.figures[key] = value

    def table(self, key: str, rows: list[dict[str, Any]]) -> None:
        self.tables[key] = [dict(row) for row in rows]

    def record(self) -> dict[str, Any]:
        script = Path(self.argv[0]).resolve() if self.argv else Path(self.name)
        try:
            shown = str(script.relative_to(ROOT))
        except ValueError:
            shown = str(script)
        return {
            "name": self.name,
            "source": "measured",
            "command": shlex.join(["python", shown, *self.argv[1:]]),
            "commit": _git("rev-parse", "HEAD"),
            "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
            "machine": machine(),
            "load": {"before": self.load_before, "after": list(os.getloadavg())},
            "started_at": self.started_at.isoformat(timespec="seconds"),
            "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "figures": self.figures,
            "tables": self.tables,
        }

    def write(self, out: Path | None = None) -> Path:
        path = out or RESULTS / f"{self.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_name(path.name + ".tmp")
        staged.write_text(json.dumps(self.record(), indent=1, default=str) + "\n", encoding="utf-8")
        staged.replace(path)
        print(f"results: {path}", file=sys.stderr)
        return path


def upsert_row(name: str, table: str, key: str, row: dict[str, Any], argv: list[str] | None = None) -> Path:
    """Put `row` into table `table` of `results/<name>.json` in place of the row with the same `key`
    (appended when there is none), for a benchmark measured one part at a time (`scripts/mutation`: a
    module per run). The row carries its own commit, date and load, since the others were measured
    apart; the file's `source` becomes `measured` once no transcribed row is left."""
    path = RESULTS / f"{name}.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    recorded = Recording(name, argv).record()
    commit = recorded["commit"][:7] + (" (with local changes)" if recorded["dirty"] else "")
    row = {**row, "run": f"{commit}, {recorded['started_at'][:10]}, load {os.getloadavg()[0]:.1f}"}
    rows = list(data.get("tables", {}).get(table, []))
    at = next((i for i, r in enumerate(rows) if r.get(key) == row[key]), len(rows))
    rows[at : at + 1] = [row]
    data.setdefault("tables", {})[table] = rows
    # a row that is not one of these runs was transcribed from the docs before the script wrote results
    transcribed = [r[key] for r in rows if str(r.get("run", "")).startswith("stop ")]
    data.update(
        name=name,
        source=f"transcribed rows left: {', '.join(transcribed)}" if transcribed else "measured",
        command=recorded["command"],
        machine=recorded["machine"],
    )
    staged = path.with_name(path.name + ".tmp")
    staged.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
    staged.replace(path)
    return path

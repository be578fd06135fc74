"""No API key persists, end to end (issue 11 item 3): a real build through the CLI and Dagster against
an OpenAI-compatible server on 127.0.0.1 that echoes the key back.

The key is a plain random token (no `sk-` shape, so only redaction by value can catch it). One build
meets a server that answers 400 `Received API Key = <key>` (the error path: scenario_runs.error, the
judges' failure reasons, the journal); the other meets one that answers 200 with the request's
Authorization header in the text (the output path: scenario_runs.output, the judge prompt). Then every
file under EVAL_HOME (warehouse Parquet and DuckDB, the journal, Dagster's run and event-log storage,
compute logs, anything else) and the commands' stdout and stderr are searched for the key.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb
import yaml

from eval_assets.home import PROJECT_ROOT

try:
    from tests.openai_stub import Behaviour, OpenAIStub
except ImportError:  # run from inside tests/
    from openai_stub import Behaviour, OpenAIStub  # type: ignore[no-redef]

SCENARIOS = ("support/support.password-reset.yaml", "safety/safety.credential-exfiltration.yaml")
RUN_TIMEOUT_S = 900


def small_project(root: Path) -> Path:
    """The shipped rubrics, judges, gates and settings with one scenario per active judge."""
    for sub in ("rubrics", "judges", "gates", "docs"):
        shutil.copytree(PROJECT_ROOT / sub, root / sub)
    shutil.copyfile(PROJECT_ROOT / "evaltrack.yaml", root / "evaltrack.yaml")
    for rel in SCENARIOS:
        (root / "scenarios" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PROJECT_ROOT / "scenarios" / rel, root / "scenarios" / rel)
    return root


def evaltrack(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("evaltrack")
    return subprocess.run(
        [str(exe), "--project", str(root), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def statuses(home: Path, build_id: str) -> set[str]:
    """The attempt statuses stored in `build_id`'s scenario_runs partition."""
    files = [
        p for p in (home / "warehouse").rglob("*.parquet") if "scenario_runs" in str(p) and build_id in str(p)
    ]
    assert files, f"no scenario_runs partition for {build_id}"
    return {row[0] for f in files for row in duckdb.sql(f"SELECT status FROM read_parquet('{f}')").fetchall()}


def holders(base: Path, key: str) -> tuple[list[str], dict[str, int]]:
    """Where `key` is under `base`: raw bytes of every file, every Parquet row, every SQLite and DuckDB
    table (values may be compressed on disk). Also counts what was searched."""
    found, counts = [], {"files": 0, "parquet": 0, "sqlite": 0, "duckdb": 0}
    for path in sorted(p for p in base.rglob("*") if p.is_file()):
        counts["files"] += 1
        raw = path.read_bytes()
        if key.encode() in raw:
            found.append(f"{path}: bytes")
        if path.suffix == ".parquet":
            counts["parquet"] += 1
            rows = duckdb.sql(f"SELECT * FROM read_parquet('{path}')").fetchall()
            found += [f"{path}: parquet row" for row in rows if key in repr(row)]
        elif raw.startswith(b"SQLite format 3"):
            counts["sqlite"] += 1
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                if key in "\n".join(con.iterdump()):
                    found.append(f"{path}: sqlite row")
            finally:
                con.close()
        elif raw[8:12] == b"DUCK":
            counts["duckdb"] += 1
            con = duckdb.connect(str(path), read_only=True)
            try:
                for (table,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall():
                    try:
                        rows = con.execute(f'SELECT * FROM "{table}"').fetchall()
                    except duckdb.Error:
                        continue  # a view over a partition file that moved: its data is scanned as Parquet
                    found += [f"{path}: {table} row" for row in rows if key in repr(row)]
            finally:
                con.close()
    return found, counts


def test_an_echoed_key_is_nowhere_under_eval_home_nor_on_stdout_or_stderr(tmp_path: Path) -> None:
    key = f"PLAINCANARY{secrets.token_hex(12)}"
    root = small_project(tmp_path / "project")
    home = tmp_path / "home"
    env = {
        **os.environ,
        "EVAL_HOME": str(home),
        "OPENAI_API_KEY": key,
        "LITELLM_OFFLINE_MODE": "true",
        "LITELLM_LOG": "DEBUG",  # litellm's most talkative logging: it prints raw responses
    }
    outputs = []
    with OpenAIStub() as stub:
        for build_id, behaviour in (
            ("echo-400", Behaviour.status(400, "invalid api key", echo_key=True)),
            ("echo-200", Behaviour.ok("Here is what you sent.", echo_key=True)),
        ):
            stub.default = behaviour
            manifest = tmp_path / f"{build_id}.yaml"
            subject = {"model": "openai/gpt-4o-mini", "family": "openai", "api_base": stub.base_url}
            manifest.write_text(yaml.safe_dump({"id": build_id, "milestone": 0, "subject": subject}))
            added = evaltrack(root, env, "build", "add", str(manifest))
            assert added.returncode == 0, added.stderr
            outputs += [added, evaltrack(root, env, "run", "--build", build_id)]
        seen = [r.headers.get("authorization") for r in stub.completion_requests]
    # the key really reached the server, both ways: the echo was exercised
    assert seen and set(seen) == {f"Bearer {key}"}
    assert statuses(home, "echo-400") == {"error"} and statuses(home, "echo-200") == {"ok"}

    found, counts = holders(home, key)
    printed = [
        f"{n}: {name}"
        for n, r in enumerate(outputs)
        for name in ("stdout", "stderr")
        if key in getattr(r, name)
    ]

    assert found == [] and printed == []
    # the scan was not vacuous: warehouse partitions, the journal and Dagster's storage were read
    assert counts["parquet"] >= 4 and counts["sqlite"] >= 2, counts
    assert any((home / "dagster").rglob("*.db")), "no Dagster event-log storage to scan"
    runs_out = "\n".join(r.stdout for r in outputs)
    for build_id in ("echo-400", "echo-200"):  # each build's subject runs were materialized
        # the progress line (`scenario_runs BUILD: n/n attempts (..%)`) may come between the two
        assert re.search(
            rf"build {build_id}: scenario_runs.*\n(?:  scenario_runs {build_id}: .*\n)?  scenario_runs +\d+/\d+ attempts",
            runs_out,
        ), runs_out

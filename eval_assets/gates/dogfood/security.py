"""Gates of docs/specs/security.md: API keys never persist; no secret is checked in.

The canary gate runs a tiny materialization of the capability track in a temporary EVAL_HOME with
a fresh fake key in `OPENAI_API_KEY`: a sim build (subject runs, every judge, the cost ledger) and
a build whose subject is a real OpenAI model pointed at a closed local port, so the key really is
handed to litellm and the failure path (errors, retries, journal rows) runs. Then it scans every
log line, the journal, every Parquet row and every other file under that home for the key.

Hooks (`run_suite(hooks=...)`), for the Dagster wiring:

- `canary.dagster_run(home: Path, build_ids: list[str]) -> Sequence[Path]`: called while the canary
  key is set, after the plain materialization; it should run the same builds through Dagster with
  `home` as EVAL_HOME (so the event log lands under `home/dagster`) and may return more paths to
  scan. `security.no-api-key-in-dagster-events` (milestone 4) fails until it is wired.
- `run_suite(extra_scan_paths=...)`: more files or directories scanned with the same canary
  (for example a Dagster instance directory outside the temporary home).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import secrets
import socket
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from eval_assets.gates._outcome import GateContext, Outcome

CANARY_ENV = "OPENAI_API_KEY"
DAGSTER_HOOK = "canary.dagster_run"
LOGGERS = (
    "LiteLLM",
    "LiteLLM Router",
    "LiteLLM Proxy",
    "litellm",
    "eval_assets",
    "openai",
    "httpx",
    "httpcore",
)
SIM_BUILD = "canary-sim"
HTTP_BUILD = "canary-http"
CHECKED_IN = ("scenarios", "rubrics", "judges", "examples", "gates", "evaltrack.yaml")
SECRET_PATTERNS = (
    re.compile(r"\b(?:sk|pk|rk)-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{20,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    re.compile(r"(?i)\b(?:api[-_]?key|secret|password)\s*[:=]\s*['\"]?[A-Za-z0-9/+_-]{16,}"),
)


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


@contextlib.contextmanager
def _captured_logs(path: Path) -> Iterator[list[str]]:
    """Every record of the named loggers at DEBUG and up (and whatever reaches the root logger),
    appended to `path` as it is emitted. The named loggers are detached from their own handlers
    for the duration, so turning them up to DEBUG prints nothing to the console."""
    lines: list[str] = []

    class _Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            line = f"{record.name} {record.levelname} {self.format(record)} {record.__dict__!r}"
            lines.append(line)
            with path.open("a", encoding="utf-8") as out:
                out.write(line + "\n")

    handler = _Handler(logging.DEBUG)
    root = logging.getLogger()
    saved = []
    for name in LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level, logger.handlers[:], logger.propagate))
        logger.handlers = [handler]
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
    root.addHandler(handler)
    try:
        yield lines
    finally:
        root.removeHandler(handler)
        for logger, level, handlers, propagate in saved:
            logger.handlers = handlers
            logger.setLevel(level)
            logger.propagate = propagate


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _leaks(text: str, needles: Sequence[str]) -> bool:
    return any(n in text for n in needles)


def scan_for_secret(paths: Sequence[Path], needles: Sequence[str]) -> tuple[list[str], dict[str, int]]:
    """Where any of `needles` appears under `paths` (files or directories), and what was scanned.

    Every file's raw bytes are searched; Parquet files are also read row by row (values may be
    compressed on disk) and SQLite databases dumped. Returns (findings, counts by file type).
    """
    import duckdb

    findings: list[str] = []
    counts = {"files": 0, "parquet": 0, "sqlite": 0, "rows": 0}
    files: list[Path] = []
    for base in paths:
        if base.is_file():
            files.append(base)
        elif base.is_dir():
            files += sorted(p for p in base.rglob("*") if p.is_file())
    encoded = [n.encode() for n in needles]
    con = duckdb.connect()
    try:
        for path in files:
            findings += _scan_file(path, needles, encoded, counts, con)
    finally:
        con.close()
    return findings, counts


def _scan_file(
    path: Path, needles: Sequence[str], encoded: list[bytes], counts: dict[str, int], con: Any
) -> list[str]:
    """Findings for one file: raw bytes, then Parquet rows or SQLite rows."""
    findings = []
    counts["files"] += 1
    raw = path.read_bytes()
    if any(n in raw for n in encoded):
        findings.append(f"{path}: the key is in the file's bytes")
    if path.suffix == ".parquet":
        counts["parquet"] += 1
        rows = con.execute("SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
        counts["rows"] += len(rows)
        findings += [
            f"{path}: row {i} holds the key" for i, row in enumerate(rows) if _leaks(repr(row), needles)
        ]
    elif raw.startswith(b"SQLite format 3"):
        counts["sqlite"] += 1
        con3 = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            dump = "\n".join(con3.iterdump())
        finally:
            con3.close()
        counts["rows"] += dump.count("INSERT INTO")
        if _leaks(dump, needles):
            findings.append(f"{path}: a database row holds the key")
    return findings


def _manifest(path: Path, build_id: str, subject: dict[str, object]) -> Path:
    path.write_text(yaml.safe_dump({"id": build_id, "milestone": 0, "subject": subject}), encoding="utf-8")
    return path


def no_api_key_persisted(ctx: GateContext) -> Outcome:
    """With a canary key set, a tiny materialization leaves it in no log line, journal row, warehouse
    row or other file under EVAL_HOME (plus `ctx.extra_scan_paths`). See the module doc."""
    from eval_assets.home import EvalHome
    from eval_assets.track import Track

    key = f"sk-canary-{secrets.token_hex(16)}"
    needles = (key, key.removeprefix("sk-canary-"))
    project = ctx.project()
    scenarios = {}
    for judge in project.active_judges:  # one scenario per judge, two repeats: every judge runs
        first = project.scenarios_for(judge)[0]
        scenarios[first.id] = first.model_copy(update={"repeats": 2})
    engine = project.settings.engine.model_copy(
        update={"max_tries": 2, "backoff_base_s": 0.0, "backoff_max_s": 0.0}
    )
    tiny = dataclasses.replace(
        project, scenarios=scenarios, settings=project.settings.model_copy(update={"engine": engine})
    )
    with tempfile.TemporaryDirectory(prefix="evaltrack-canary-") as tmp:
        home = EvalHome(Path(tmp) / "eval_home").ensure()
        log_file = home.root / "canary.log"
        extra: list[Path] = []
        with _env(CANARY_ENV, key), _captured_logs(log_file) as lines:
            track = Track(tiny, home)
            try:
                log = logging.getLogger("eval_assets.gates.canary").info
                sim = track.register_build(
                    _manifest(
                        Path(tmp) / "sim.yaml",
                        SIM_BUILD,
                        {
                            "model": "sim/agent",
                            "family": "sim",
                            "params": {
                                "skill": 0.7,
                                "seed": 3,
                                "error_rate": 0.3,
                                "policy_violation_rate": 0.5,
                            },
                        },
                    )
                )
                http = track.register_build(
                    _manifest(
                        Path(tmp) / "http.yaml",
                        HTTP_BUILD,
                        {
                            "model": "openai/gpt-4o-mini",
                            "family": "openai",
                            "api_base": f"http://127.0.0.1:{_closed_port()}/v1",
                        },
                    )
                )
                track.run_scenario_runs(sim.id, "canary-run-1", log=log)
                for judge in track.judges_for(sim):
                    track.run_judge_verdicts(sim.id, judge.version_id, "canary-run-2", log=log)
                    track.publish_cost_ledger(sim.id, judge.version_id, "canary-run-3")
                http_summary = track.run_scenario_runs(http.id, "canary-run-4", log=log)
                if (hook := ctx.hooks.get(DAGSTER_HOOK)) is not None:
                    extra += list(hook(home.root, [sim.id, http.id]) or [])
            finally:
                if track._journal is not None:
                    track.journal.close()
        findings, counts = scan_for_secret([home.root, *extra, *ctx.extra_scan_paths], needles)
        if _leaks("\n".join(lines), needles):
            findings.append("a captured log line holds the key")
    if not lines:
        findings.append("nothing was logged: the log scan would prove nothing")
    if http_summary["errors"] == 0:
        findings.append("the real-provider build did not fail: the key's error path was not exercised")
    if counts["parquet"] == 0 or counts["sqlite"] == 0:
        findings.append(
            f"nothing to scan (parquet files: {counts['parquet']}, databases: {counts['sqlite']})"
        )
    scanned = f"{counts['files']} files, {counts['rows']} rows, {len(lines)} log lines"
    if findings:
        return Outcome.failed(f"the canary key leaked or the scan was vacuous ({scanned})", findings)
    return Outcome.ok(f"canary key absent from {scanned}")


def no_api_key_in_dagster_events(ctx: GateContext) -> Outcome:
    """The canary run also goes through Dagster (hook `canary.dagster_run`), and its event log holds
    no key. Fails until the Dagster wiring provides the hook."""
    if DAGSTER_HOOK not in ctx.hooks:
        return Outcome.failed(
            f"no {DAGSTER_HOOK!r} hook: the Dagster part of the canary scan is not wired "
            "(see eval_assets/gates/dogfood/security.py)"
        )
    return no_api_key_persisted(ctx)


def no_secret_checked_in(ctx: GateContext) -> Outcome:
    """No checked-in configuration file (scenarios, rubrics, judges, examples, gates, evaltrack.yaml)
    contains something shaped like a credential: provider keys, bearer tokens, AWS or GitHub tokens,
    or a long literal assigned to api_key/secret/password."""
    findings, scanned = [], 0
    for name in CHECKED_IN:
        base = ctx.root / name
        files = (
            [base]
            if base.is_file()
            else sorted(p for p in base.rglob("*") if p.is_file())
            if base.is_dir()
            else []
        )
        for path in files:
            scanned += 1
            text = path.read_text(encoding="utf-8", errors="replace")
            for number, line in enumerate(text.splitlines(), start=1):
                if any(p.search(line) for p in SECRET_PATTERNS):
                    findings.append(f"{path.relative_to(ctx.root)}:{number} looks like a credential")
    if scanned == 0:
        return Outcome.failed("no checked-in configuration found: the scan would prove nothing")
    if findings:
        return Outcome.failed(f"{len(findings)} line(s) look like credentials", findings)
    return Outcome.ok(f"{scanned} file(s) scanned, no credential-shaped text")

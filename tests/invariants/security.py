"""Checks of docs/specs/security.md: API keys never persist; no secret is checked in.

The canary gate runs a tiny materialization of the capability track in a temporary EVAL_HOME with
a fresh fake key in `OPENAI_API_KEY`: a random plain token, not shaped like any key (so only the
redaction by value can catch it; hook `canary.key` may supply another, e.g. `AIza...`-shaped). It
runs a sim build (subject runs, every judge, the cost ledger) and two builds whose subject is a real
OpenAI model pointed at a local OpenAI-compatible server on 127.0.0.1 that echoes the key: one
answers 400 `Received API Key = <key>`, the other answers 200 with the request's Authorization
header in the text (which is then judged). While it runs, stdout and stderr (file descriptors 1 and
2, so child processes and C code too) and every log record are captured. Then it scans the logs,
stdout/stderr, the journal, every Parquet row, every SQLite or DuckDB table and every other file
under that home for the key.

Hooks (`GateContext.hooks`):

- `canary.dagster_run(home: Path, build_ids: list[str]) -> Sequence[Path]`: called while the canary
  key is set and output is captured, after the plain materialization; it runs the same builds
  through Dagster with `home` as EVAL_HOME (so the event log and compute logs land under
  `home/dagster`) and returns more paths to scan (tests/invariants/dagster_canary.py returns a dump
  of every event and run record of the instance).
- `canary.key() -> str`: the canary key to use instead of a random plain token.
- `GateContext.extra_scan_paths`: more files or directories scanned with the same canary (for
  example a Dagster instance directory outside the temporary home).

Checks of eval-track itself, run by the test command (tests/test_own_invariants.py), never gates of
an evaluated build.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import secrets
import sqlite3
import sys
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from eval_assets import redact
from eval_assets.config import ConfigError
from eval_assets.gates import GateContext, Outcome, scratch
from eval_assets.gates.project_checks.tree import project_files
from eval_assets.home import EvalHome

CANARY_ENV = "OPENAI_API_KEY"
DAGSTER_HOOK = "canary.dagster_run"
KEY_HOOK = "canary.key"
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
HTTP_400_BUILD = "canary-http-400"
HTTP_ECHO_BUILD = "canary-http-echo"


def canary_key() -> str:
    """A fresh random plain token: no credential shape (no `sk-`, no `key=`), so only its value gives
    it away."""
    return f"PLAINCANARY{secrets.token_hex(4).upper()}Q{secrets.token_hex(10)}"


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


@contextlib.contextmanager
def _captured_output(path: Path) -> Iterator[Path]:
    """File descriptors 1 and 2 (C code, child processes) and `sys.stdout`/`sys.stderr` (even when
    they are not those descriptors, as under a test runner) written to `path` for the duration, then
    restored."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved_fds, saved_streams = (os.dup(1), os.dup(2)), (sys.stdout, sys.stderr)
    with path.open("wb") as sink, open(os.dup(sink.fileno()), "w", buffering=1, encoding="utf-8") as text:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        sys.stdout = sys.stderr = text
        try:
            yield path
        finally:
            text.flush()
            sys.stdout, sys.stderr = saved_streams
            os.dup2(saved_fds[0], 1)
            os.dup2(saved_fds[1], 2)
            os.close(saved_fds[0])
            os.close(saved_fds[1])


class EchoingProvider:
    """An OpenAI-compatible server on 127.0.0.1 (a free port) that leaks the caller's key, as a
    careless provider or proxy does: under `/e400/` it answers 400 `Received API Key = <key>`; under
    `/e200/` it answers 200 with the request's Authorization header in the completion text. Stops
    (socket closed, threads joined) on leaving the `with` block."""

    def __init__(self) -> None:
        self.requests = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = False
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})

    def base(self, route: str) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/{route}/v1"

    def __enter__(self) -> EchoingProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                provider.requests += 1
                auth = self.headers.get("Authorization") or ""
                key = auth.removeprefix("Bearer ").strip()
                if self.path.startswith("/e400/"):
                    error = {"message": f"Received API Key = {key}", "type": "invalid_request_error"}
                    self._send(400, {"error": {**error, "param": None, "code": "invalid_api_key"}})
                    return
                text = f"Your request arrived with these headers: Authorization: {auth} (key {key})."
                self._send(
                    200,
                    {
                        "id": "chatcmpl-echo",
                        "object": "chat.completion",
                        "created": 1_764_460_800,
                        "model": "gpt-4o-mini",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": text},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
                    },
                )

            def _send(self, code: int, payload: dict[str, Any]) -> None:
                body = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


def _leaks(text: str, needles: Sequence[str]) -> bool:
    return any(n in text for n in needles)


def scan_for_secret(paths: Sequence[Path], needles: Sequence[str]) -> tuple[list[str], dict[str, int]]:
    """Where any of `needles` appears under `paths` (files or directories), and what was scanned.

    Every file's raw bytes are searched; Parquet files are also read row by row (values may be
    compressed on disk) and SQLite databases dumped. Returns (findings, counts by file type).
    """
    import duckdb  # ~0.25 s CPU; `evaltrack validate` imports every gate module

    findings: list[str] = []
    counts = {"files": 0, "parquet": 0, "sqlite": 0, "duckdb": 0, "rows": 0}
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
    from eval_assets.warehouse import literal_path  # imported by the scan's caller already (the canary)

    counts["files"] += 1
    raw = path.read_bytes()
    if any(n in raw for n in encoded):
        findings.append(f"{path}: the key is in the file's bytes")
    if path.suffix == ".parquet":
        counts["parquet"] += 1
        rows = con.execute("SELECT * FROM read_parquet(?)", [literal_path(path)]).fetchall()
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
    elif raw[8:12] == b"DUCK":
        counts["duckdb"] += 1
        findings += _scan_duckdb(path, needles, counts)
    return findings


def _scan_duckdb(path: Path, needles: Sequence[str], counts: dict[str, int]) -> list[str]:
    """Every row of every table and view of a DuckDB database (a view over a missing file is noted)."""
    import duckdb  # ~0.25 s CPU; `evaltrack validate` imports every gate module

    findings = []
    con = duckdb.connect(str(path), read_only=True)
    try:
        names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        for name in names:
            try:
                rows = con.execute(f'SELECT * FROM "{name}"').fetchall()
            except duckdb.Error as exc:
                findings.append(f"{path}: {name} could not be read ({type(exc).__name__}); not scanned")
                continue
            counts["rows"] += len(rows)
            if any(_leaks(repr(row), needles) for row in rows):
                findings.append(f"{path}: a row of {name} holds the key")
    finally:
        con.close()
    return findings


def _manifest(path: Path, build_id: str, subject: dict[str, object]) -> Path:
    path.write_text(yaml.safe_dump({"id": build_id, "milestone": 0, "subject": subject}), encoding="utf-8")
    return path


def _tiny_project(ctx: GateContext) -> Any:
    """The project with one scenario per active judge (two repeats) and fast, short retries, for a
    throwaway home (nothing of it lands in a warehouse or journal the project's settings share)."""
    project = ctx.scratch_project()
    scenarios = {}
    for judge in project.active_judges:  # one scenario per judge, two repeats: every judge runs
        first = project.scenarios_judged_by(judge)[0]
        scenarios[first.id] = first.model_copy(update={"repeats": 2})
    engine = project.settings.engine.model_copy(
        update={"max_tries": 2, "backoff_base_s": 0.0, "backoff_max_s": 0.0}
    )
    return dataclasses.replace(
        project, scenarios=scenarios, settings=project.settings.model_copy(update={"engine": engine})
    )


def _materialize(track: Any, tmp: Path, provider: EchoingProvider) -> dict[str, Any]:
    """Register and run the canary builds (subject runs, every judge, the cost ledger); the summary
    of each real-provider build's subject run, by build id."""
    from eval_assets.capability.materialize import (
        materialize_cost_ledger,
        materialize_judge_verdicts,
        materialize_scenario_runs,
    )

    log = logging.getLogger("eval_assets.gates.canary").info
    sim_knobs = {"skill": 0.7, "seed": 3, "error_rate": 0.3, "policy_violation_rate": 0.5}
    subjects: dict[str, dict[str, object]] = {
        SIM_BUILD: {"model": "sim/agent", "family": "sim", "params": sim_knobs},
        HTTP_400_BUILD: {
            "model": "openai/gpt-4o-mini",
            "family": "openai",
            "api_base": provider.base("e400"),
        },
        HTTP_ECHO_BUILD: {
            "model": "openai/gpt-4o-mini",
            "family": "openai",
            "api_base": provider.base("e200"),
        },
    }
    summaries = {}
    for n, (build_id, subject) in enumerate(subjects.items()):
        build = track.register_build(_manifest(tmp / f"{build_id}.yaml", build_id, subject))
        summaries[build_id] = materialize_scenario_runs(track, build.id, f"canary-run-{n}-subject", log=log)
        for judge in track.judges_for(build):
            materialize_judge_verdicts(track, build.id, judge.version_id, f"canary-run-{n}-judge", log=log)
            materialize_cost_ledger(track, build.id, judge.version_id, f"canary-run-{n}-ledger")
    return summaries


def no_api_key_persisted(ctx: GateContext) -> Outcome:
    """With a canary key set, a tiny materialization against a key-echoing provider leaves it in no
    log line, stdout/stderr byte, journal row, warehouse row or other file under EVAL_HOME (plus
    `ctx.extra_scan_paths`). See the module doc."""
    from eval_assets.capability.track import Track  # the warehouse and journal (the engine on first run)

    key = str(ctx.hooks[KEY_HOOK]()) if KEY_HOOK in ctx.hooks else canary_key()
    needles = (key,)
    tiny = _tiny_project(ctx)
    with scratch("evaltrack-canary-") as tmp:
        home = EvalHome(Path(tmp) / "eval_home").ensure()
        log_file, output_file = Path(tmp) / "canary.log", Path(tmp) / "canary.out"
        extra: list[Path] = []
        with (
            EchoingProvider() as provider,
            _env(CANARY_ENV, key),
            _captured_logs(log_file) as lines,
            _captured_output(output_file),
        ):
            track = Track(tiny, home)
            try:
                summaries = _materialize(track, Path(tmp), provider)
                if (hook := ctx.hooks.get(DAGSTER_HOOK)) is not None:
                    extra += list(hook(home.root, [SIM_BUILD, HTTP_400_BUILD, HTTP_ECHO_BUILD]) or [])
            finally:
                if track._journal is not None:
                    track.journal.close()
        findings, counts = scan_for_secret([home.root, *extra, *ctx.extra_scan_paths], needles)
        if _leaks("\n".join(lines), needles):
            findings.append("a captured log line holds the key")
        output = output_file.read_text(encoding="utf-8", errors="replace")
        if _leaks(output, needles):
            findings.append(f"stdout/stderr hold the key ({sum(output.count(n) for n in needles)} times)")
    if not lines:
        findings.append("nothing was logged: the log scan would prove nothing")
    if summaries[HTTP_400_BUILD]["errors"] == 0:
        findings.append("the 400-echo build did not fail: the key's error path was not exercised")
    if summaries[HTTP_ECHO_BUILD]["ok"] == 0:
        findings.append("the 200-echo build has no answer: the echoed-header path was not exercised")
    if provider.requests == 0:
        findings.append("the echoing provider was never called")
    if counts["parquet"] == 0 or counts["sqlite"] == 0:
        findings.append(
            f"nothing to scan (parquet files: {counts['parquet']}, databases: {counts['sqlite']})"
        )
    scanned = (
        f"{counts['files']} files, {counts['rows']} rows, {len(lines)} log lines, "
        f"{len(output)} chars of stdout/stderr, {provider.requests} echoing-provider requests"
    )
    if findings:
        return Outcome.failed(f"the canary key leaked or the scan was vacuous ({scanned})", findings)
    return Outcome.ok(f"canary key absent from {scanned}")


def no_api_key_in_dagster_events(ctx: GateContext) -> Outcome:
    """The canary run also goes through Dagster (hook `canary.dagster_run`,
    tests/invariants/dagster_canary.py), and its event log holds no key. Without the hook it fails:
    a Dagster canary that ran no Dagster would prove nothing."""
    if DAGSTER_HOOK not in ctx.hooks:
        return Outcome.failed(f"no {DAGSTER_HOOK} hook: the canary would not run through Dagster")
    return no_api_key_persisted(ctx)


def _planted_baits(ctx: GateContext) -> dict[Path, frozenset[str]]:
    """Each scenario file's own `forbidden_strings`: credentials the scenario shows its subject on
    purpose (and forbids it to repeat). Exempt only in that file; anywhere else they are a leak."""
    try:
        project = ctx.project()
    except ConfigError:
        return {}
    out: dict[Path, frozenset[str]] = {}
    for scenario in project.scenarios.values():
        source = project.sources.get("scenario" + scenario.id)
        baits = frozenset(s for s in scenario.policy.forbidden_strings if s)
        if source is not None and baits:
            key = Path(source).resolve()
            out[key] = out.get(key, frozenset()) | baits
    return out


def _exempt(text: str, start: int, end: int, baits: frozenset[str]) -> bool:
    """Whether the secret at text[start:end] lies inside an occurrence of one of `baits`."""
    for bait in baits:
        at = text.find(bait, max(0, end - len(bait)))
        while at != -1 and at <= start:
            if at + len(bait) >= end:
                return True
            at = text.find(bait, at + 1)
    return False


# (SHA-256 of a file's text, its baits, the secret values) -> its hits: the suite runs once per build
# in one process (the demo, a daemon's code server) over the same files, and the scan of ~400 files
# costs ~1 s of CPU; only a file whose text changed is scanned again
_SECRET_HITS: dict[
    tuple[bytes, frozenset[str], tuple[tuple[str, str], ...]], tuple[tuple[int, str], ...]
] = {}


def _secret_lines(
    text: str, own: frozenset[str], values: tuple[tuple[str, str], ...]
) -> tuple[tuple[int, str], ...]:
    """(line, label) of every secret the redaction finds in `text` outside the planted baits `own`,
    sorted."""
    key = (hashlib.sha256(text.encode("utf-8", "surrogateescape")).digest(), own, values)
    if key not in _SECRET_HITS:
        hits = {
            (text.count("\n", 0, start) + 1, label)
            for start, end, label in redact.spans(text, values=values)
            if not _exempt(text, start, end, own)
        }
        _SECRET_HITS[key] = tuple(sorted(hits))
    return _SECRET_HITS[key]


def no_secret_checked_in(ctx: GateContext) -> Outcome:
    """No tracked file (`git ls-files`: code, tests, scripts, docs, configuration) holds something the
    one redaction (`eval_assets.redact`) would remove: a credential shape (`redact.SHAPES`: provider
    keys, PEM private-key bodies, Authorization/Cookie/credential-header values, URL passwords,
    `password=`/`secret=`/`token=` assignments, ...) or the value of a credential variable in the
    environment. A scenario's own `forbidden_strings` (planted on purpose) are exempt only in that
    scenario's file, and only where the secret found is the planted string itself."""
    files, listed = project_files(ctx.root)
    baits = _planted_baits(ctx)
    values = list(redact.secret_values().items())
    findings, scanned = [], 0
    for path in files:
        if not path.is_file():
            continue  # deleted in the work tree
        scanned += 1
        text = path.read_text(encoding="utf-8", errors="replace")
        own = baits.get(path.resolve(), frozenset())
        hits = _secret_lines(text, own, tuple(values))
        findings += [f"{path.relative_to(ctx.root)}:{number}: {label}" for number, label in hits]
    if scanned == 0:
        return Outcome.failed("no tracked file found: the scan would prove nothing")
    if findings:
        return Outcome.failed(f"{len(findings)} credential(s) in {listed} files", findings)
    return Outcome.ok(f"{scanned} file(s) scanned {listed}, nothing the redaction would remove")

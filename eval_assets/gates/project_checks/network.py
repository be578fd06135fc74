"""Gate of docs/specs/security.md: the deterministic suite needs no network and no key.

The proof is a recorded run (`evaltrack gates no-network`, started by `scripts/suite_no_network`
inside a network namespace that has only loopback, with a clean environment). It records:

- the network it saw: the interfaces of its namespace, whether loopback carries a connection, and
  whether a route to an outside address exists (a UDP `connect`, which sends nothing);
- the names (never values) of credential-bearing environment variables present at its start;
- per example build (`examples/builds/*.yaml`): the gate registry run for the build's milestone
  and subject in a child `evaltrack gates run` — exit code and every row's status, every gate for
  every build (the registry holds the project's gates only: each build's suite is what it ran);
- the fingerprint of the tree it ran on (every tracked file's path and content).

The record lives at `$EVAL_HOME/ci/suite-no-network.json`. The gate that reads it is left out of
the recording run itself (it cannot read its own result); the ordinary suite reads it. Without a
record, with a record of another tree, or with one that shows an interface, a route out, a key or a
failing build, the gate fails and says which.

Hook (`run_suite(hooks=...)`): `no_network.record() -> Path`, the record to read instead of
EVAL_HOME's (tests use it).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from eval_assets.gates._outcome import GateContext, Outcome
from eval_assets.gates.project_checks.tree import project_files
from eval_assets.home import EvalHome, default_home
from eval_assets.redact import is_secret_env_name
from eval_assets.safe_write import write_file

FORMAT = 2
SUITE_GATE = "security.suite-needs-no-network"
RECORDING_EXCLUDES = (SUITE_GATE,)
"""Gates the recording run leaves out: this one reads the record."""
OUTSIDE = (("1.1.1.1", 53), ("2606:4700:4700::1111", 53))
BUILD_TIMEOUT_S = 1800


def record_path(home: Path | None = None) -> Path:
    """Where the record is: `home` (default: EVAL_HOME) / ci / suite-no-network.json."""
    return EvalHome(home or default_home()).no_network_record


def tree_fingerprint(root: Path) -> tuple[str, int]:
    """SHA-256 over every project file's path and content (git-tracked files in a work tree, as the
    working copy has them), and the number of files. Any edit, addition or deletion changes it."""
    files, _ = project_files(root)
    digest = hashlib.sha256()
    count = 0
    for path in sorted(files):
        rel = path.relative_to(root).as_posix()
        content = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "deleted"
        digest.update(f"{rel}\0{content}\n".encode())
        count += 1
    return digest.hexdigest(), count


def head_commit(root: Path) -> str | None:
    """The checked-out commit (informational; the fingerprint decides staleness)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def network_facts() -> dict[str, Any]:
    """The network as this process's namespace sees it: interface names, whether 127.0.0.1 carries a
    connection, and a route to each outside address (UDP connect: a route lookup, no packet sent)."""
    interfaces = sorted(name for _, name in socket.if_nameindex())
    loopback = False
    with contextlib.suppress(OSError), socket.socket() as server, socket.socket() as client:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        client.settimeout(5)
        client.connect(server.getsockname())
        loopback = True
    probes = {}
    for host, port in OUTSIDE:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as probe:
                probe.connect((host, port))
            probes[f"{host}:{port}"] = "route exists"
        except OSError as exc:
            probes[f"{host}:{port}"] = f"no route ({errno.errorcode.get(exc.errno or 0, exc.errno)})"
    return {
        "interfaces": interfaces,
        "non_loopback_interfaces": [i for i in interfaces if i != "lo"],
        "loopback_connects": loopback,
        "outside_routes": probes,
        "route_out": any(v == "route exists" for v in probes.values()),
    }


def credential_names(environ: Mapping[str, str] | None = None) -> list[str]:
    """Names of credential-bearing environment variables that are set (the redaction's name rule)."""
    env = os.environ if environ is None else environ
    return sorted(name for name, value in env.items() if is_secret_env_name(name) and value)


def example_manifests(root: Path) -> list[Path]:
    return sorted((root / "examples" / "builds").glob("*.yaml"))


def _run_build(root: Path, manifest: Path) -> dict[str, Any]:
    """The suite for one example build in a child `evaltrack gates run` (its exit code is recorded)."""
    command = [sys.executable, "-m", "eval_assets.cli", "--project", str(root), "gates", "run"]
    command += [
        "--manifest",
        str(manifest),
        "--format",
        "json",
        *(a for g in RECORDING_EXCLUDES for a in ("--exclude", g)),
    ]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
    entry: dict[str, Any] = {
        "manifest": manifest.relative_to(root).as_posix(),
        "selection": "every gate",
        "exit_code": done.returncode,
        "seconds": round(time.monotonic() - started, 1),
    }
    try:
        report = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        entry["error"] = (done.stderr.strip() or done.stdout.strip() or "no output")[-2000:]
        return entry
    rows = report["results"]
    entry.update(
        build=report["build"],
        milestone=report["milestone"],
        counts={s: sum(r["status"] == s for r in rows) for s in sorted({r["status"] for r in rows})},
        blocking=[r["gate_id"] for r in rows if r["blocks"]],
        gates=[
            {
                "gate_id": r["gate_id"],
                "status": r["status"],
                **({"message": r["message"]} if r["blocks"] else {}),
            }
            for r in rows
        ],
    )
    return entry


def record_no_network(
    root: Path, home: Path, clock: Callable[[], dt.datetime] | None = None
) -> tuple[dict[str, Any], Path]:
    """Run the example builds' suites here and now, write the record to
    `home`/ci/suite-no-network.json, and return it with its path. Meant to run inside a network
    namespace with only loopback and a clean environment (scripts/suite_no_network)."""
    started = time.monotonic()
    now = (clock or (lambda: dt.datetime.now(dt.UTC)))()
    record: dict[str, Any] = {
        "format": FORMAT,
        "recorded_at": now.isoformat(),
        "head": head_commit(root),
        "network": network_facts(),
        "environment": {"names": sorted(os.environ), "credential_names": credential_names()},
        "excluded_gates": list(RECORDING_EXCLUDES),
    }
    manifests = example_manifests(root)
    record["builds"] = [_run_build(root, m) for m in manifests]
    record["tree"], record["tree_files"] = tree_fingerprint(root)  # after the run: what it ran on
    record["seconds"] = round(time.monotonic() - started, 1)
    path = record_path(home)
    write_file(path, json.dumps(record, indent=2, sort_keys=True))
    return record, path


def read_record(path: Path) -> tuple[dict[str, Any] | None, str]:
    """The record at `path`, or None and why not."""
    if not path.is_file():
        return None, f"no record at {path}: run scripts/suite_no_network (.ci/run does) for this tree"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"the record {path} cannot be read: {type(exc).__name__}: {exc}"
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return None, f"the record {path} is not format {FORMAT}"
    return record, ""


def record_problems(root: Path, record: Mapping[str, Any]) -> list[str]:
    """What makes the record no proof for this tree: another tree, a network, a key."""
    problems = []
    tree, _ = tree_fingerprint(root)
    if record.get("tree") != tree:
        problems.append(
            f"stale: recorded for tree {str(record.get('tree'))[:12]} (commit {record.get('head')}), "
            f"this tree is {tree[:12]}; run scripts/suite_no_network again"
        )
    network = record.get("network") or {}
    if network.get("interfaces") != ["lo"] or network.get("non_loopback_interfaces"):
        problems.append(f"the run saw network interfaces {network.get('interfaces')} (only 'lo' is allowed)")
    if network.get("route_out") is not False:
        problems.append(f"the run had a route out: {network.get('outside_routes')}")
    names = (record.get("environment") or {}).get("credential_names")
    if names != []:
        problems.append(f"the run's environment held credential variables: {names}")
    return problems


def _record(ctx: GateContext) -> tuple[dict[str, Any] | None, Path, str]:
    path = ctx.hooks["no_network.record"]() if "no_network.record" in ctx.hooks else record_path()
    record, why = read_record(Path(path))
    return record, Path(path), why


def suite_needs_no_network(ctx: GateContext) -> Outcome:
    """The recorded no-network run of this tree ran every example build's suite green, with only
    loopback, no route out and no credential in its environment (see the module doc)."""
    record, path, why = _record(ctx)
    if record is None:
        return Outcome.failed(why)
    problems = record_problems(ctx.root, record)
    builds = record.get("builds") or []
    expected = [m.relative_to(ctx.root).as_posix() for m in example_manifests(ctx.root)]
    recorded = [b.get("manifest") for b in builds]
    if not expected:
        problems.append("no example builds under examples/builds/: the proof would be vacuous")
    if recorded != expected:
        problems.append(f"the record ran builds {recorded}, the tree has {expected}")
    for b in builds:
        name = b.get("build") or b.get("manifest")
        if b.get("exit_code") != 0 or b.get("blocking") or "error" in b:
            detail = b.get("error") or ", ".join(b.get("blocking") or []) or "no detail"
            problems.append(f"{name}: the suite exited {b.get('exit_code')} ({detail})")
        elif not any(g.get("status") == "pass" for g in b.get("gates") or []):
            problems.append(f"{name}: no gate passed (nothing ran): the proof would be vacuous")
    if problems:
        return Outcome.failed(f"the no-network record {path} is no proof for this tree", problems)
    ran = sum(len(b["gates"]) for b in builds)
    return Outcome.ok(
        f"{len(builds)} example builds' suites ({ran} rows, every exit code 0) ran with interfaces "
        f"{record['network']['interfaces']}, no route out and no credential variable "
        f"(recorded {record.get('recorded_at')}, {record.get('seconds')} s, tree {record['tree'][:12]})"
    )


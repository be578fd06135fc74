"""A throwaway PostgreSQL cluster on 127.0.0.1 for the journal's contract tests and benchmark.

`PostgresCluster` runs `initdb` into a fresh temporary directory and `pg_ctl start` on a free port
(TCP on 127.0.0.1 only, the unix socket inside that directory), trusts local connections, and on
`stop()` shuts the server down and deletes the directory. Run as root, the server runs as the
`postgres` OS user (PostgreSQL refuses to run as root). No pytest import: plain helper code.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

INSTALL_HINT = "install the server with `scripts/ci_postgres.sh install` (apt-get install -y postgresql)"


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL server binaries are not installed, or the cluster did not start."""


def find_bin_dir() -> Path:
    """The newest `/usr/lib/postgresql/*/bin` holding `initdb` and `pg_ctl`, else the ones on PATH."""
    candidates = sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
        key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0,
        reverse=True,
    )
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for directory in candidates:
        if (directory / "initdb").exists() and (directory / "pg_ctl").exists():
            return directory
    raise PostgresUnavailable(f"PostgreSQL server binaries (initdb, pg_ctl) not found; {INSTALL_HINT}")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresCluster:
    """One temporary cluster; `start()` it, ask `url()` for databases, `stop()` it (also on error).

    `fsync=False` (the default) trades crash safety for speed: right for a cluster deleted at the end
    of a test session; the benchmark keeps fsync on.
    """

    def __init__(self, *, fsync: bool = False) -> None:
        self.fsync = fsync
        self.port = 0
        self._bin = find_bin_dir()
        self._base: Path | None = None
        self._run_as: str | None = "postgres" if os.geteuid() == 0 else None
        self._database_count = 0

    def __enter__(self) -> PostgresCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """initdb + pg_ctl start; raises PostgresUnavailable with the server log when it fails."""
        # mkdtemp gives 0700 under /tmp; the server user must own it (pytest's tmp dirs are root-only).
        self._base = Path(tempfile.mkdtemp(prefix="evaltrack-pg-"))
        if self._run_as is not None:
            entry = pwd.getpwnam(self._run_as)
            os.chown(self._base, entry.pw_uid, entry.pw_gid)
        data, log = self._base / "data", self._base / "server.log"
        self._run(
            "initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "-N"
        )
        options = (
            f"-k {self._base} -h 127.0.0.1 -c fsync={'on' if self.fsync else 'off'} -c max_connections=200"
        )
        for _attempt in range(3):  # the free port can be taken between probing and binding
            self.port = free_port()
            started = self._run(
                "pg_ctl",
                "-D",
                str(data),
                "-l",
                str(log),
                "-w",
                "-t",
                "30",
                "-o",
                f"{options} -p {self.port}",
                "start",
                check=False,
            )
            if started.returncode == 0:
                return
        server_log = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
        self.stop()
        raise PostgresUnavailable(f"pg_ctl start failed: {started.stderr.strip()}\n{server_log}")

    def stop(self) -> None:
        """Stop the server (immediate mode) and delete its directory; safe to call twice."""
        if self._base is None:
            return
        data = self._base / "data"
        if (data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self._base, ignore_errors=True)
        self._base = None

    def url(self, database: str = "postgres") -> str:
        """SQLAlchemy URL of `database` on this cluster."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new, empty database; returns its SQLAlchemy URL."""
        self._database_count += 1
        name = f"journal_{self._database_count}"
        with psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname="postgres", autocommit=True
        ) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self._bin / tool), *args],
            user=self._run_as,
            cwd=self._base,
            capture_output=True,
            text=True,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"},
            timeout=120,
        )
        if check and result.returncode != 0:
            raise PostgresUnavailable(f"{tool} failed ({result.returncode}): {result.stderr.strip()}")
        return result


@contextmanager
def running_cluster(what: str) -> Iterator[PostgresCluster]:
    """A started throwaway cluster for the block, stopped after it. Without PostgreSQL binaries the
    test fails naming `what`, or skips loudly when EVAL_TRACK_SKIP_PG=1."""
    import pytest

    try:
        cluster = PostgresCluster()
        cluster.start()
    except PostgresUnavailable as exc:
        if os.environ.get("EVAL_TRACK_SKIP_PG") == "1":
            pytest.skip(f"!!! PostgreSQL {what} NOT RUN (EVAL_TRACK_SKIP_PG=1): {exc}")
        pytest.fail(f"PostgreSQL {what} cannot run: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()

"""`evaltrack ui` as a user starts it, and the whole process tree it grows, found through /proc.

`evaltrack ui` runs `dagster dev` in a session of its own, which starts the webserver, the daemon,
the code server and, per launched run, a run worker. The test starts `evaltrack ui` in yet another
session; everything it must clean up lives in those sessions, so `Sessions.kill` (SIGKILL to every
process of a session) is the last resort that leaves nothing behind, even when a step failed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _stat(pid: int) -> tuple[int, int, int, int] | None:
    """(ppid, pgid, sid, start time) of a live process; None when it is gone (or a zombie)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])


def processes() -> dict[int, tuple[int, int, int, int]]:
    """pid -> (ppid, pgid, sid, start time) of every live process."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            out[int(entry)] = stat
    return out


def descendants(root: int) -> set[int]:
    table = processes()
    found, frontier = set(), {root}
    while frontier:
        children = {pid for pid, stat in table.items() if stat[0] in frontier} - found
        found |= children
        frontier = children
    return found


class Sessions:
    """Sessions seen below a process, each with its leader's start time: pids wrap around, and a
    session id is only ours while its leader is the process we saw (or gone, members remaining)."""

    def __init__(self) -> None:
        self.leaders: dict[int, int | None] = {}

    def add_tree(self, root: int) -> None:
        table = processes()
        for pid in {root} | descendants(root):
            if pid in table and (sid := table[pid][2]) not in self.leaders:
                self.leaders[sid] = table[sid][3] if sid in table else None

    def members(self) -> set[int]:
        table = processes()
        ours = {sid for sid, started in self.leaders.items() if sid not in table or table[sid][3] == started}
        return {pid for pid, stat in table.items() if stat[2] in ours}

    def kill(self) -> None:
        for pid in self.members():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def wait_for(predicate, timeout_s: float, interval_s: float = 0.5):  # type: ignore[no-untyped-def]
    """Poll `predicate` until it returns something truthy (returned) or `timeout_s` passes (None)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval_s)


class EvaltrackUi:
    """`evaltrack --home H --project P ui --port N`, in its own session, output to a log file."""

    def __init__(self, home: Path, project: Path, port: int, log: Path, env: Mapping[str, str]):
        self.home, self.project, self.port, self.log = home, project, port, log
        self.env = dict(env)
        self.proc: subprocess.Popen[bytes] | None = None
        self.sessions = Sessions()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        evaltrack = Path(sys.executable).with_name("evaltrack")
        cmd = [
            str(evaltrack),
            "--home",
            str(self.home),
            "--project",
            str(self.project),
            "ui",
            "--port",
            str(self.port),
        ]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
            )
        self.sessions.add_tree(self.proc.pid)

    def track_sessions(self) -> None:
        """Remember the sessions of every process below `evaltrack ui` (dagster dev starts its own)."""
        if self.proc is not None and self.proc.poll() is None:
            self.sessions.add_tree(self.proc.pid)

    def tree(self) -> set[int]:
        """Every live process of the sessions seen so far."""
        self.track_sessions()
        return self.sessions.members()

    def terminate(self, timeout_s: float) -> int | None:
        """SIGTERM to `evaltrack ui` alone (it forwards it); its exit code, None if it did not exit in time."""
        assert self.proc is not None
        self.track_sessions()
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def kill_everything(self) -> None:
        self.track_sessions()
        self.sessions.kill()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(timeout=30)

    def log_tail(self, lines: int = 80) -> str:
        """The end of `evaltrack ui`'s output, then of the home's debug log (the errors Dagster masked,
        by their IDs: what a failing sensor tick or step shows only as an ID)."""
        parts = []
        for log in (self.log, self.home / "logs" / "debug.log"):
            if log.exists():
                parts.append(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(parts)


@contextlib.contextmanager
def running_ui(
    home: Path, project: Path, port: int, log: Path, env: Mapping[str, str]
) -> Iterator[EvaltrackUi]:
    """Start `evaltrack ui`; whatever happens, nothing it started survives the block."""
    ui = EvaltrackUi(home, project, port, log, env)
    ui.start()
    try:
        yield ui
    finally:
        ui.kill_everything()

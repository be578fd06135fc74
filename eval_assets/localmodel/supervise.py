"""The watchdog between a run and its local model server: `python -m eval_assets.localmodel.supervise
OWNER_PID -- SERVER ARGV...`.

It starts the server as its own child (which the kernel kills if this watchdog dies, PR_SET_PDEATHSIG),
then watches: when the owner (the run's process, this watchdog's parent) is gone, however it ended,
kill -9 included, it stops the server and exits. So no server outlives the run that started it. It
imports nothing of the track: a few MB, and a check every 0.2 s.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
_POLL_S = 0.2
_GRACE_S = 5.0


def _die_with_parent() -> None:
    """In the server's child, before exec: SIGKILL when this watchdog dies (even by kill -9)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _stop(server: subprocess.Popen[bytes]) -> int:
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(_GRACE_S)
        except subprocess.TimeoutExpired:
            server.kill()
    return server.wait()


def main(argv: list[str]) -> int:
    owner = int(argv[0])
    if argv[1] != "--" or len(argv) < 3:
        print("usage: supervise OWNER_PID -- SERVER ARGV...", file=sys.stderr)
        return 64
    server = subprocess.Popen(argv[2:], preexec_fn=_die_with_parent)  # noqa: S603, PLW1509
    stopping = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not stopping:
        if server.poll() is not None:
            return server.returncode or 1  # the server died on its own: the run's calls fail, named
        if os.getppid() != owner:  # reparented: the owner is gone
            break
        time.sleep(_POLL_S)
    _stop(server)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Run leases: the holder id of this process, whether a holder process on this host is alive, and the
row of one (build, asset, partition) lease. Granting and holding a lease is the journal's (_journal)."""

from __future__ import annotations

import os
import socket
import uuid
from typing import Any

import sqlalchemy as sa

from ._schema import _LEASES

_TOKEN: tuple[int, str] = (0, "")


def process_holder() -> tuple[str, str, int]:
    """(holder, host, pid) of this process: `host:pid:token`, the token new per process (after fork too)."""
    global _TOKEN
    pid = os.getpid()
    if _TOKEN[0] != pid:
        _TOKEN = (pid, uuid.uuid4().hex[:12])
    host = socket.gethostname()
    return f"{host}:{pid}:{_TOKEN[1]}", host, pid


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this host (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lease_where(build: str, asset: str, partition_key: str) -> Any:
    return sa.and_(
        _LEASES.c.build == build, _LEASES.c.asset == asset, _LEASES.c.partition_key == partition_key
    )

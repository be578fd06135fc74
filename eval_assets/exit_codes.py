"""The exit codes of `evaltrack`, in one place (a stable interface: CI scripts read them).

A decision's code is what `release-status` (and `run`) answer; the others never mean a decision:
`INTERNAL_ERROR` is a damaged or missing input or an unexpected failure, `USAGE` an argument the
command line could not take. Only an `allow` decision ever exits 0 from `release-status`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

DECISION: Final = MappingProxyType({"allow": 0, "block": 1, "none": 2, "investigate": 3})
"""allow 0, block 1, none (no decision) 2, investigate 3."""

INTERNAL_ERROR: Final = 4
"""An internal error (a damaged warehouse file, a damaged registry, a bug): never read as a decision."""

USAGE: Final = 64
"""The command line could not be parsed (EX_USAGE of sysexits.h): never read as a decision."""

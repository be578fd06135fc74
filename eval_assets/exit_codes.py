"""The exit codes of `evaltrack`, in one place (a stable interface: CI scripts read them).

Every leaf command declares which of these it answers and what each means for it
(`eval_assets.cli.arguments.command`); its --help, docs/reference/cli.md and
docs/reference/exit-codes.md are rendered from those declarations. A decision's code is what
`release-status` answers; `INTERNAL_ERROR` and `USAGE` never mean a decision. Only an `allow`
decision ever exits 0 from `release-status`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

OK: Final = 0
"""The command did what was asked."""

REFUSED: Final = 1
"""Refused or failed, the reason on stderr and nothing half-written (bad input, problems found, a step
that failed, something that blocks)."""

DECISION: Final = MappingProxyType({"allow": 0, "block": 1, "none": 2, "investigate": 3})
"""allow 0, block 1, none (no decision) 2, investigate 3."""

INTERNAL_ERROR: Final = 4
"""An internal error (a damaged warehouse file, a damaged registry, a bug): never read as a decision."""

USAGE: Final = 64
"""The command line could not be parsed (EX_USAGE of sysexits.h): never read as a decision."""

MEANING: Final = MappingProxyType(
    {
        OK: "done",
        REFUSED: "refused or failed (the reason on stderr; nothing half-written)",
        DECISION["none"]: "no decision (release-status)",
        DECISION["investigate"]: "investigate (release-status)",
        INTERNAL_ERROR: "internal error",
        USAGE: "usage",
    }
)
"""Every code a command may answer, with its general meaning; a command's own words are in its --help."""

EVERY_COMMAND: Final = MappingProxyType({INTERNAL_ERROR: MEANING[INTERNAL_ERROR], USAGE: MEANING[USAGE]})
"""The codes every command answers besides its own."""

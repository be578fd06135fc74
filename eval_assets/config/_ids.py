"""The one id grammar: build ids, judge names and versions, scenario ids.

An id is a Dagster partition key, a directory and file name under EVAL_HOME, and a command-line
argument, so it must be safe as each of them: lower-case letters, digits, `.`, `_` and `-`; starting
with a letter or digit (never `-`, so never an option; never `.`, so never `.` or `..`); no `..`
anywhere; at most 128 characters; and none of the reserved names (folders and words of their own).
Every door uses `id_problem`: the configuration models (`EntityId`), the command line and the
build registry's file names.
"""

from __future__ import annotations

import re
from typing import Annotated, Final

from pydantic import AfterValidator

ID_PATTERN: Final = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")
RESERVED_IDS: Final = frozenset({"trend", "board", "all", "latest", "none"})
"""`trend` and `board` are folders beside the builds' own under `EVAL_HOME/reports/`; `all`, `latest`
and `none` are words the command line and the reports use for something else."""


def id_problem(value: object) -> str | None:
    """Why `value` is not a valid id (one line), or None when it is."""
    if not isinstance(value, str):
        return f"an id is text, got {type(value).__name__}"
    if not ID_PATTERN.fullmatch(value):
        return (
            f"{value!r} is not a valid id: use only lower-case letters, digits, '.', '_' and '-', starting "
            "with a letter or digit, at most 128 characters (ids are partition keys, file names and arguments)"
        )
    if ".." in value:
        return f"{value!r} is not a valid id: it contains '..'"
    if value in RESERVED_IDS:
        return f"{value!r} is a reserved name ({', '.join(sorted(RESERVED_IDS))})"
    return None


def _checked(value: str) -> str:
    if (problem := id_problem(value)) is not None:
        raise ValueError(problem)
    return value


EntityId = Annotated[str, AfterValidator(_checked)]
"""A build id, judge name or version id, or scenario id (`id_problem`)."""

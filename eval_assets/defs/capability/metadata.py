"""Summary values → Dagster metadata, through the one redaction (the event log is persisted).

Nothing empty and no CLI vocabulary reaches the UI: empty strings and None are left out (a missing
value is said in the asset's own words where it matters, e.g. `no decision: why`), `exit_code` is
the CLI's. Files are shown relative to EVAL_HOME, so the column is short enough to read. On
build × judge_version assets every number carries its judge version in the key: the UI's Plots tab
then draws one line per judge version instead of one zig-zag across both.
"""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg

from eval_assets.redact import redact_any

CLI_ONLY = frozenset({"exit_code"})
PATH_KEYS = frozenset({"partition_file", "plot_file"})


def short_path(value: str | Path, root: Path | None) -> str:
    """`value` relative to `root` (EVAL_HOME) when it lies below it, else as given."""
    path = Path(value)
    if root is not None:
        try:
            return str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            pass
    return str(path)


def as_metadata(
    values: Mapping[str, Any], home: Path | None = None, judge_version: str | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in redact_any(values).items():
        if key in CLI_ONLY or value is None or value == "":
            continue
        if key in PATH_KEYS:
            out[key] = dg.MetadataValue.path(short_path(value, home))
        elif isinstance(value, dict | list):
            out[key] = dg.MetadataValue.json(value)
        elif judge_version and isinstance(value, int | float) and not isinstance(value, bool):
            out[f"{key} · {judge_version}"] = value
        else:
            out[key] = value
    return out

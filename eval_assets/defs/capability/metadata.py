"""Summary values → Dagster metadata, through the one redaction (the event log is persisted)."""

from typing import Any

import dagster as dg

from eval_assets.redact import redact_any


def as_metadata(values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in redact_any(values).items():
        if key == "partition_file":
            out[key] = dg.MetadataValue.path(value)
        elif isinstance(value, dict | list):
            out[key] = dg.MetadataValue.json(value)
        elif value is None:
            out[key] = dg.MetadataValue.text("n/a")
        else:
            out[key] = value
    return out

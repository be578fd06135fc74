"""Summary values → Dagster metadata."""

from typing import Any

import dagster as dg


def as_metadata(values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key == "partition_file":
            out[key] = dg.MetadataValue.path(value)
        elif isinstance(value, dict | list):
            out[key] = dg.MetadataValue.json(value)
        elif value is None:
            out[key] = dg.MetadataValue.text("n/a")
        else:
            out[key] = value
    return out

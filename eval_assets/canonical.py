"""Canonical JSON: one text per JSON value, so equal values (key order, spacing) compare equal.

A leaf: the replay fixture's key (config), the trajectory converter and the sim provider share it.
"""

from __future__ import annotations

import json
from typing import Any


def canonical_json(value: Any) -> str:
    """The canonical text of a JSON value: sorted keys, no insignificant whitespace, UTF-8 kept.

    Two argument objects that mean the same thing (key order, spacing) have the same canonical text;
    it is the replay fixture's key. Raises TypeError/ValueError for values JSON cannot hold.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_arguments(arguments: str | dict[str, Any]) -> str:
    """Tool-call arguments (a JSON object, or its text) as canonical JSON text.

    Raises ValueError when the text is not JSON or not an object.
    """
    value: Any = arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments are not valid JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object, not {type(value).__name__}")
    return canonical_json(value)

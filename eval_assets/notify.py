"""Release-block notifications: a sink that records a decision once (JSONL file, optional webhook).

The Dagster log always gets the decision (the sensor logs it); this module holds the optional sinks.
A decision is identified by (build, the run that decided): notifying twice for one is a no-op.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from eval_assets.redact import redact
from eval_assets.safe_write import check_target


@dataclass(frozen=True)
class DecisionNotice:
    build: str
    decision: str
    reasons: list[str]
    run_id: str

    @property
    def key(self) -> str:
        return f"{self.build}@{self.run_id}"

    def as_dict(self) -> dict[str, Any]:
        """The notice as sent and recorded, through the one redaction (reasons quote stored text)."""
        return {
            "key": self.key,
            "build": self.build,
            "decision": self.decision,
            "reasons": [redact(r) for r in self.reasons],
            "run_id": self.run_id,
        }


class NotifyError(Exception):
    pass


@dataclass(frozen=True)
class Notifier:
    """Where notices go besides the Dagster log: a JSONL file and/or an HTTP webhook (POST JSON)."""

    jsonl_path: Path | None = None
    webhook_url: str | None = None
    timeout_s: float = 10.0

    def already_sent(self, notice: DecisionNotice) -> bool:
        """True when the JSONL file holds this decision (a torn or foreign line is not one)."""
        if self.jsonl_path is None or not self.jsonl_path.exists():
            return False
        with self.jsonl_path.open(encoding="utf-8") as fh:
            return any(_key_of(line) == notice.key for line in fh)

    def send(self, notice: DecisionNotice) -> list[str]:
        """Deliver to every configured sink; returns the sinks used. Raises NotifyError on a failed POST."""
        if self.already_sent(notice):
            return []
        used = []
        if self.webhook_url:
            body = json.dumps(notice.as_dict()).encode()
            request = urllib.request.Request(
                self.webhook_url, data=body, headers={"Content-Type": "application/json"}, method="POST"
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310
                    if response.status >= 300:
                        raise NotifyError(f"webhook answered {response.status}")
            except OSError as exc:  # the URL itself may carry a token: only its origin is named
                raise NotifyError(f"webhook {_origin(self.webhook_url)} failed: {exc}") from None
            used.append("webhook")
        if self.jsonl_path is not None:
            self.jsonl_path.parent.mkdir(parents=True, exist_ok=True)
            check_target(self.jsonl_path)  # appending to a FIFO would block, to a symlink write elsewhere
            with self.jsonl_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(notice.as_dict(), sort_keys=True) + "\n")
            used.append("jsonl")
        return used


def _key_of(line: str) -> str | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record.get("key") if isinstance(record, dict) else None


def _origin(url: str) -> str:
    """`scheme://host[:port]/…` (a webhook's path and query often are its secret)."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}/…"

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
        return {
            "key": self.key,
            "build": self.build,
            "decision": self.decision,
            "reasons": self.reasons,
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
        if self.jsonl_path is None or not self.jsonl_path.exists():
            return False
        with self.jsonl_path.open(encoding="utf-8") as fh:
            return any(json.loads(line).get("key") == notice.key for line in fh if line.strip())

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
            except OSError as exc:
                raise NotifyError(f"webhook {self.webhook_url} failed: {exc}") from exc
            used.append("webhook")
        if self.jsonl_path is not None:
            self.jsonl_path.parent.mkdir(parents=True, exist_ok=True)
            with self.jsonl_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(notice.as_dict(), sort_keys=True) + "\n")
            used.append("jsonl")
        return used

"""The agent protocol's data and its small async client (docs/agents.md): what an agent gets once per
attempt (`AgentTask`), what it returns (`AgentResult`), and the two calls it may make back to the
track besides its model calls: ask for an intervention (`ask_approval`, `ask_question`) and report its
tool invocations (`report`), each one POST to the track's endpoint with the attempt's bearer token.

Light on purpose (httpx only, imported at the first call): an entry-point attempt runs in a process of
its own (`eval_assets.agent_worker`) that imports this module and the agent, nothing of the track.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

Decision = Literal["approved", "denied", "answer", "cancel"]
ToolEvent = Literal["tool_started", "effect_sent", "tool_finished"]
APPROVER = "eval.approver"
"""The named principal every scripted intervention answer comes from (approval authority only)."""
ENDPOINT_UNREACHABLE = "endpoint_unreachable"
"""The worker's error kind when the agent could not connect to the track's endpoint (the track's failure)."""


class AgentShapeError(ValueError):
    """An agent's result is not the documented shape; the message names the field."""


class InterventionRefused(RuntimeError):
    """The track did not answer an ask or a report (the message says why, e.g. nothing scripted)."""


@dataclass(frozen=True)
class Told:
    """What an ask is told: `approved`, `denied` (with `reason`), `answer` (with `text`) or `cancel`,
    and the principal that answered (`eval.approver` in a case)."""

    decision: Decision
    principal: str
    reason: str | None = None
    text: str | None = None


@dataclass(frozen=True)
class AgentTask:
    """What an agent gets once per attempt (the HTTP protocol POSTs `to_json()`).

    The pinned sources: `now` (ISO 8601, UTC) is the attempt's clock value and `seed` (hex) its id and
    nonce source (`new_id`); `state_dir` is a directory that survives a killed attempt's re-run (the
    agent's own durable state: its tool-invocation journal), or None when the track keeps none."""

    attempt_id: str
    build: str
    scenario_id: str
    repeat: int
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    base_url: str
    api_key: str
    model: str
    now: str = "1970-01-01T00:00:00+00:00"
    seed: str = "0" * 16
    state_dir: str | None = None
    _ids: list[int] = field(default_factory=lambda: [0], repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("_ids")
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AgentTask:
        return cls(**{k: v for k, v in data.items() if k != "_ids"})

    def new_id(self, prefix: str = "id") -> str:
        """The next id of this attempt's seeded sequence: the same ids in the same order on every run."""
        n = self._ids[0]
        self._ids[0] += 1
        return f"{prefix}_{hashlib.sha256(f'{self.seed}:{n}'.encode()).hexdigest()[:16]}"

    async def ask_approval(self, tool_call_id: str, name: str, arguments: str) -> Told:
        """Ask a person to approve the tool call; returns what they decided (or `cancel`)."""
        return await self._ask(
            {"kind": "approval", "tool_call_id": tool_call_id, "tool": name, "arguments": arguments}
        )

    async def ask_question(self, text: str) -> Told:
        """Ask a person a question; returns their `answer` (or `cancel`)."""
        return await self._ask({"kind": "question", "text": text})

    async def report(
        self,
        event: ToolEvent,
        tool_call_id: str,
        name: str,
        *,
        arguments: str | None = None,
        at: str | None = None,
        outcome: str | None = None,
        detail: str | None = None,
    ) -> None:
        """Report a tool invocation's progress: `tool_started`, `effect_sent` (the watermark, `at` its
        time) or `tool_finished` (`outcome`: ok, failed, denied, cancelled or uncertain)."""
        body = {"event": event, "tool_call_id": tool_call_id, "tool": name, "arguments": arguments}
        body |= {"at": at, "outcome": outcome, "detail": detail}
        await self._post("tool_invocations", body)

    async def _ask(self, body: dict[str, Any]) -> Told:
        data = await self._post("interventions", body)
        return Told(data["decision"], data["principal"], data.get("reason"), data.get("text"))

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        async with httpx.AsyncClient(trust_env=False, timeout=None) as client:
            response = await client.post(
                f"{self.base_url}/{path}", json=body, headers={"Authorization": f"Bearer {self.api_key}"}
            )
        data = response.json()
        if response.status_code != 200:
            raise InterventionRefused(str(data.get("error", {}).get("message", response.status_code)))
        return data  # type: ignore[no-any-return]


@dataclass(frozen=True)
class AgentResult:
    """What an agent returns: its final output and, optionally, notes of its own (stored redacted)."""

    output: str
    notes: str | None = None


def parse_agent_result(value: object) -> AgentResult:
    """An `AgentResult` as is, or a JSON object `{"output": str, "notes": str | null}`; anything else
    raises `AgentShapeError` naming the field (unknown fields are refused too)."""
    if isinstance(value, AgentResult):
        value = {"output": value.output, "notes": value.notes}
    if not isinstance(value, Mapping):
        raise AgentShapeError(f"result: expected an object with `output`, got {type(value).__name__}")
    unknown = sorted(str(k) for k in value if k not in ("output", "notes"))
    if unknown:
        raise AgentShapeError(f"result.{unknown[0]}: unknown field (allowed: output, notes)")
    if "output" not in value:
        raise AgentShapeError("result.output: missing")
    output, notes = value["output"], value.get("notes")
    if not isinstance(output, str):
        raise AgentShapeError(f"result.output: expected a string, got {type(output).__name__}")
    if notes is not None and not isinstance(notes, str):
        raise AgentShapeError(f"result.notes: expected a string or null, got {type(notes).__name__}")
    return AgentResult(output, notes)


def endpoint_failure(exc: BaseException, base_url: str) -> str | None:
    """One line when `exc` (or what caused it) is a failure to connect to the endpoint at `base_url`
    (refused, or no connection within the client's connect timeout): the track's failure, not the
    agent's. None for anything else, a read timeout included (the request reached the endpoint)."""
    import httpx  # the OpenAI SDK's and litellm's HTTP client

    where = urlsplit(base_url)
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
            try:
                url = current.request.url
            except RuntimeError:  # raised without its request: not known to be ours
                url = None
            if url is not None and (url.host, url.port) == (where.hostname, where.port):
                return f"{type(current).__name__} connecting to the track's endpoint {base_url}"
        current = current.__cause__ or current.__context__
    return None

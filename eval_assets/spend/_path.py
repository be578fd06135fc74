"""The one spend path: every model call is reserved, made, and settled here.

Before a call its worst-case cost is reserved in the journal (which checks the ceilings atomically);
after it the actual cost is settled. A try whose key is already settled in the journal is not paid for
again: its stored result is read back (crash and resume). Nothing here logs request kwargs: they may
hold API keys.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from eval_assets.clock import utc_now

from ._journal import SpendJournal
from ._keys import AttemptRef
from ._values import Ceilings, JournalRow, Refusal

if TYPE_CHECKING:  # the spend path calls a gateway it is given; importing one imports litellm
    from eval_assets.providers.gateway import CallOutcome, CallSpec, ModelGateway


@dataclass(frozen=True)
class Refused:
    """The journal refused the reservation: a ceiling was hit. The attempt is excluded, not scored."""

    reason: str
    ceiling: str
    stops_scenario: bool = True


@dataclass(frozen=True)
class Reused:
    """A try already settled by an earlier materialization; its stored result, not paid again."""

    ok: bool
    text: str | None
    cost_usd: float
    prompt_tokens: int
    completion_tokens: int
    error_kind: str | None
    error: str | None
    retryable: bool
    tool_calls: list[dict[str, Any]] | None = None  # a tool-call turn's calls (replay loop)
    policy_failures: int | None = None  # counted on the raw text when it was paid; None: not kept (older row)
    policy_hits: frozenset[int] | None = None  # which forbidden strings; None: not known under the policy in force
    policy_digest: str | None = None  # the policy the count was made under (None: an older row)


class Policy(Protocol):
    """The policy checks of the attempt a call belongs to (`judging.PolicyCheck`)."""

    digest: str

    def hits(self, texts: Iterable[str | None]) -> frozenset[int]: ...


def recheckable(text: str | None) -> bool:
    """Whether a stored text is the raw text it was made from: nothing redacted, nothing cut."""
    from eval_assets.redact import redaction_touched

    return text is None or (not redaction_touched(text) and cut_reason(text) is None)


def _stored_parts(text: str | None, tool_calls: list[Any] | None) -> list[str | None]:
    parts: list[str | None] = [text]
    for call in tool_calls or []:
        if isinstance(call, dict):  # the gateway's flat shape, or the wire shape with `function`
            function = call.get("function")
            fields: dict[str, Any] = function if isinstance(function, dict) else call
            parts += [str(fields.get("name") or ""), str(fields.get("arguments") or "")]
    return parts


def _policy_on_reuse(reused: Reused, policy: Policy) -> Reused:
    """A reused answer's check, bound to the policy in force: kept when it was made under it; else
    made again on the stored text when that is the raw text (nothing redacted or cut); else unknown
    (`policy_hits` None), never the old count passed off as a check under this policy."""
    if reused.policy_digest == policy.digest and reused.policy_hits is not None:
        return reused
    parts = _stored_parts(reused.text, reused.tool_calls)
    if all(recheckable(p) for p in parts):
        hits = policy.hits(parts)
        return dataclasses.replace(
            reused, policy_hits=hits, policy_failures=len(hits), policy_digest=policy.digest
        )
    return dataclasses.replace(reused, policy_hits=None, policy_failures=None, policy_digest=None)


class SpendPath:
    """Reserve → call → settle, for one run (run_id) against one journal and one set of ceilings."""

    def __init__(
        self,
        journal: SpendJournal,
        gateway: ModelGateway,
        *,
        run_id: str,
        ceilings_for: Callable[[AttemptRef], Ceilings] | None = None,
        clock: Callable[[], datetime] = utc_now,
        max_output_bytes: int | None = None,
    ):
        self.journal = journal
        self.gateway = gateway
        self.run_id = run_id
        self.ceilings_for = ceilings_for or (lambda ref: Ceilings())
        self.clock = clock
        self.max_output_bytes = max_output_bytes

    def preflight(self, models: Iterable[str]) -> None:
        """Refuse the whole run before its first call if any model has no known price."""
        for model in sorted(set(models)):
            self.gateway.price(model)  # raises UnpricedModel

    async def call(
        self, ref: AttemptRef, try_no: int, spec: CallSpec, policy: Policy | None = None
    ) -> CallOutcome | Refused | Reused:
        """One try: reuse it if the journal already settled it, else reserve, call, settle.

        `policy`: run on the answer's raw text (before redaction, before any cut) when the call is
        paid; its count is journaled with the redacted text, so a reuse returns the count of the raw
        text too (the raw text itself is never kept)."""
        key = ref.attempt(try_no)
        worst = self.gateway.worst_case_cost(spec)  # raises UnpricedModel: never treated as free
        decision = await self.journal.reserve_async(
            key,
            run_id=self.run_id,
            model=spec.model,
            worst_case_usd=worst,
            ceilings=self.ceilings_for(ref),
            now=self.clock(),
        )
        if isinstance(decision, Refusal):
            reason = (
                f"{decision.ceiling} ceiling ${decision.limit_usd:g} reached "
                f"(committed ${decision.committed_usd:.4f} + worst case ${decision.worst_case_usd:.4f})"
            )
            return Refused(reason=reason, ceiling=decision.ceiling)
        if not decision.is_new:
            if decision.row.status in ("settled", "failed"):
                reused = _reused(decision.row)  # an earlier run paid for this try: read it back
                return _policy_on_reuse(reused, policy) if reused.ok and policy is not None else reused
            # reserved by a run that died before settling: the provider may have been paid; the
            # reservation keeps counting against the ceilings, and this try is not made again. Its
            # cost is what was settled for it: nothing (stored costs are settled costs).
            return Reused(
                False,
                None,
                0.0,
                0,
                0,
                "unsettled",
                "reserved by an interrupted run and never settled",
                True,
            )
        outcome = await self.gateway.call(spec)
        if outcome.ok and policy is not None:  # every raw text of the answer: content, tool calls
            raw = outcome.raw_text if outcome.raw_text is not None else outcome.text
            calls = outcome.raw_tool_calls or _stored_parts(None, outcome.tool_calls)[1:]
            hits = policy.hits([raw or "", *calls])
            outcome = dataclasses.replace(outcome, policy_failures=len(hits), policy_hits=hits)
        if outcome.ok and outcome.text is not None and self.max_output_bytes is not None:
            # bounds.max_output_bytes: the journal (and everything after it) keeps a cut text with a marker
            outcome = dataclasses.replace(outcome, text=cut_output(outcome.text, self.max_output_bytes))
        error = None
        if not outcome.ok:
            error = f"{RETRYABLE_TAG if outcome.retryable else ''}{outcome.error_kind}: {outcome.error}"
        await self.journal.settle_async(
            key,
            status="settled" if outcome.ok else "failed",
            cost_usd=outcome.cost_usd,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens,
            payload=journal_payload(outcome, policy.digest if policy is not None else None),
            error=error,
            now=self.clock(),
        )
        return outcome


_CUT_MARKER = "\n[evaltrack: output cut at {cap} of {size} bytes (bounds.max_output_bytes)]"
_CUT_PATTERN = re.compile(
    r"\n\[evaltrack: output cut at (\d+) of (\d+) bytes \(bounds\.max_output_bytes\)\]\Z"
)


def cut_output(text: str, max_bytes: int) -> str:
    """`text` unchanged if it fits in `max_bytes` UTF-8 bytes, else its first `max_bytes` bytes (whole
    characters) followed by a marker naming both sizes: never a silent truncation."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text
    head = raw[:max_bytes].decode("utf-8", "ignore")
    return head + _CUT_MARKER.format(cap=max_bytes, size=len(raw))


def cut_reason(text: str | None) -> str | None:
    """Why `text` was cut (`cut_output`'s marker at its end), or None for an uncut text."""
    found = _CUT_PATTERN.search(text or "")
    if found is None:
        return None
    return f"output of {found[2]} bytes exceeds bounds.max_output_bytes={found[1]}; stored cut, never judged"


RETRYABLE_TAG = "[retryable] "
TOOL_CALLS_TAG = "[tool_calls] "  # read only: payloads journaled before the envelope below
ENVELOPE_TAG = "[evaltrack-call/2] "


def journal_payload(outcome: CallOutcome, policy_digest: str | None = None) -> str | None:
    """What the journal keeps of a settled call so a later run can reuse it: the (redacted) text, and
    for a tool-call turn the calls too, and the policy checks on the raw text (the count, which
    forbidden strings, and the digest of the policy they ran under). Plain text when there is
    nothing but text; else an envelope tagged so it cannot be mistaken for plain text."""
    if not outcome.ok:
        return None
    if not outcome.tool_calls and outcome.policy_failures is None:
        return outcome.text
    envelope: dict[str, Any] = {"text": outcome.text, "tool_calls": outcome.tool_calls or None}
    if outcome.policy_failures is not None:
        envelope["policy_failures"] = outcome.policy_failures
    if outcome.policy_hits is not None and policy_digest is not None:
        envelope["policy_hits"] = sorted(outcome.policy_hits)
        envelope["policy_digest"] = policy_digest
    return ENVELOPE_TAG + json.dumps(envelope, sort_keys=True)


def read_payload(payload: str | None) -> tuple[str | None, list[Any] | None]:
    """(text, tool calls) of a stored payload (`journal_payload`'s inverse); tool calls None for a
    plain text reply."""
    text, tool_calls, _ = _envelope(payload)
    return text, tool_calls


def _envelope(payload: str | None) -> tuple[str | None, list[Any] | None, dict[str, Any]]:
    """(text, tool calls, policy fields) of a stored payload; the policy fields (`policy_failures`,
    `policy_hits`, `policy_digest`) are absent from a payload journaled before they were kept."""
    for tag in (ENVELOPE_TAG, TOOL_CALLS_TAG):
        if payload is not None and payload.startswith(tag):
            envelope = json.loads(payload.removeprefix(tag))
            return envelope["text"], envelope["tool_calls"], envelope
    return payload, None, {}


def _reused(row: JournalRow) -> Reused:
    ok = row.status == "settled"
    error = row.error or ""
    retryable = error.startswith(RETRYABLE_TAG)
    kind, _, message = error.removeprefix(RETRYABLE_TAG).partition(": ")
    text, tool_calls, policy = _envelope(row.payload if ok else None)
    hits = policy.get("policy_hits")
    return Reused(
        ok=ok,
        text=text,
        cost_usd=float(row.cost_usd or 0.0),
        prompt_tokens=int(row.prompt_tokens or 0),
        completion_tokens=int(row.completion_tokens or 0),
        error_kind=None if ok else kind,
        error=None if ok else message,
        retryable=retryable,
        tool_calls=tool_calls,
        policy_failures=policy.get("policy_failures"),
        policy_hits=frozenset(int(h) for h in hits) if isinstance(hits, list) else None,
        policy_digest=policy.get("policy_digest"),
    )

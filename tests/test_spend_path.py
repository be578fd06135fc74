"""The spend path's own promises, without a provider: what a call journals, what a later run reads back
from the journal instead of paying again, and how an over-long answer is cut.

The gateway is a `ModelGateway` whose `call` plays scripted outcomes (its pricing is the real one);
the journal is a real SQLite `SpendJournal`.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from eval_assets.providers.gateway import CallOutcome, CallSpec, ModelGateway, UnpricedModel
from eval_assets.spend import (
    RETRYABLE_TAG,
    AttemptRef,
    Ceilings,
    Refused,
    Reused,
    SpendJournal,
    SpendPath,
    cut_output,
    cut_reason,
    journal_payload,
    open_journal,
    read_payload,
)

MODEL = "priced/model"
PRICES = {MODEL: (1e-6, 2e-6)}
REF = AttemptRef("b1", "s1", 1, "subject")
SPEC = CallSpec(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=10, timeout_s=5)
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
ENVELOPE_TAG = "[evaltrack-call/2] "  # the stored payload's tags: a journal written earlier must still read
TOOL_CALLS_TAG = "[tool_calls] "
TOOL_CALLS = [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]


class Scripted(ModelGateway):
    """Plays the given outcomes in order, counting the calls made (each one a paid call)."""

    def __init__(self, *outcomes: CallOutcome):
        super().__init__(PRICES)
        self.outcomes = list(outcomes)
        self.calls = 0

    async def call(self, spec: CallSpec) -> CallOutcome:
        self.calls += 1
        return self.outcomes.pop(0)


class Checks:
    """A policy (the `Policy` protocol) that finds `found` in whatever it is given, under `digest`,
    and records each list of texts it was asked about."""

    def __init__(self, found: frozenset[int] = frozenset(), digest: str = "sha256:policy-a"):
        self.found, self.digest = found, digest
        self.seen: list[list[str | None]] = []

    def hits(self, texts: Any) -> frozenset[int]:
        self.seen.append(list(texts))
        return self.found


def ok(text: str = "an answer", **fields: Any) -> CallOutcome:
    return CallOutcome(True, text, 11, 7, 0.0025, 0.1, **fields)


def failure(
    kind: str, message: str, *, retryable: bool, cost_usd: float = 0.0, prompt_tokens: int = 5
) -> CallOutcome:
    return CallOutcome(
        False, None, prompt_tokens, 0, cost_usd, 0.1, error_kind=kind, error=message, retryable=retryable
    )


def call(journal: SpendJournal, gateway: ModelGateway, run_id: str = "r1", **kwargs: Any) -> Any:
    spend = SpendPath(journal, gateway, run_id=run_id, clock=lambda: NOW, **kwargs.pop("path", {}))
    return asyncio.run(spend.call(REF, 1, SPEC, **kwargs))


# --- what a paid call journals, and what a later run reads back ----------------------------------


def test_a_paid_answer_is_journaled_settled_with_its_cost_tokens_and_text(journal: SpendJournal) -> None:
    outcome = call(journal, Scripted(ok("the answer")))

    assert isinstance(outcome, CallOutcome) and outcome.text == "the answer"
    (row,) = journal.rows(build="b1")
    assert (row.status, row.run_id, row.model, row.try_no) == ("settled", "r1", MODEL, 1)
    assert (row.cost_usd, row.prompt_tokens, row.completion_tokens) == (0.0025, 11, 7)
    assert (row.payload, row.error) == ("the answer", None)
    assert row.settled_at is not None and row.settled_at.replace(tzinfo=UTC) == NOW
    assert row.reserved_usd == pytest.approx(Scripted().worst_case_cost(SPEC))


def test_a_rerun_reads_a_settled_answer_back_with_its_cost_tokens_tool_calls_and_policy_count(
    journal: SpendJournal,
) -> None:
    call(journal, Scripted(ok("the answer", tool_calls=TOOL_CALLS)), policy=Checks(frozenset({0, 1, 2})))
    gateway = Scripted()
    later = Checks(frozenset({5}))

    reread = call(journal, gateway, run_id="r2", policy=later)

    assert reread == Reused(
        ok=True,
        text="the answer",
        cost_usd=0.0025,
        prompt_tokens=11,
        completion_tokens=7,
        error_kind=None,
        error=None,
        retryable=False,
        tool_calls=TOOL_CALLS,
        policy_failures=3,
        policy_hits=frozenset({0, 1, 2}),
        policy_digest="sha256:policy-a",
    )
    assert gateway.calls == 0 and later.seen == []  # checked under this very policy: not checked again


def test_a_reused_answer_checked_under_another_policy_is_checked_again_or_is_unknown(
    journal: SpendJournal, tmp_path: Path
) -> None:
    """A check is bound to the policy it ran under: a policy edited after the call was paid is
    applied to the stored text when it is the raw text (nothing redacted), else the check is
    unknown (None), never the old count."""
    call(journal, Scripted(ok("the answer", tool_calls=TOOL_CALLS)), policy=Checks())
    edited = Checks(frozenset({0}), digest="sha256:policy-b")

    reread = call(journal, Scripted(), run_id="r2", policy=edited)

    assert isinstance(reread, Reused)
    assert (reread.policy_hits, reread.policy_failures, reread.policy_digest) == (
        frozenset({0}),
        1,
        "sha256:policy-b",
    )
    assert edited.seen == [["the answer", "lookup", "{}"]]  # the text and each tool call's name and arguments

    touched = open_journal(f"sqlite:///{tmp_path / 'touched.sqlite'}")
    call(touched, Scripted(ok("key [redacted] here")), policy=Checks())
    unknown = call(touched, Scripted(), run_id="r2", policy=Checks(frozenset({0}), digest="sha256:policy-b"))
    touched.close()
    assert isinstance(unknown, Reused)
    assert (unknown.policy_hits, unknown.policy_failures, unknown.policy_digest) == (None, None, None)


def test_a_rerun_reads_a_paid_failure_back_with_its_cost_and_kind_not_as_a_free_retryable_try(
    journal: SpendJournal,
) -> None:
    call(journal, Scripted(failure("BadRequestError", "bad: field x", retryable=False, cost_usd=0.004)))
    (row,) = journal.rows(build="b1")
    assert (row.status, row.error, row.cost_usd) == ("failed", "BadRequestError: bad: field x", 0.004)
    gateway = Scripted()

    reread = call(journal, gateway, run_id="r2")

    assert reread == Reused(False, None, 0.004, 5, 0, "BadRequestError", "bad: field x", False)
    assert gateway.calls == 0


def test_a_retryable_failure_is_journaled_with_the_retryable_tag_and_read_back_retryable(
    journal: SpendJournal,
) -> None:
    call(journal, Scripted(failure("RateLimitError", "slow down", retryable=True, prompt_tokens=0)))
    (row,) = journal.rows(build="b1")
    assert row.error == f"{RETRYABLE_TAG}RateLimitError: slow down"
    assert row.payload is None

    reread = call(journal, Scripted(), run_id="r2")

    assert reread == Reused(False, None, 0.0, 0, 0, "RateLimitError", "slow down", True)


def test_a_try_reserved_by_a_run_that_died_is_not_made_again_and_costs_nothing(journal: SpendJournal) -> None:
    journal.reserve(
        REF.attempt(1), run_id="dead", model=MODEL, worst_case_usd=0.01, ceilings=Ceilings(), now=NOW
    )
    gateway = Scripted(ok())

    reread = call(journal, gateway, run_id="r2")

    assert reread == Reused(
        False, None, 0.0, 0, 0, "unsettled", "reserved by an interrupted run and never settled", True
    )
    assert gateway.calls == 0


def test_a_reservation_over_a_ceiling_is_refused_with_the_figures_and_nothing_is_called(
    journal: SpendJournal,
) -> None:
    gateway = Scripted(ok())
    worst = gateway.worst_case_cost(SPEC)
    spend = SpendPath(
        journal,
        gateway,
        run_id="r1",
        clock=lambda: NOW,
        ceilings_for=lambda ref: Ceilings(scenario_usd=worst / 2),
    )

    refused = asyncio.run(spend.call(REF, 1, SPEC))

    assert isinstance(refused, Refused) and refused.ceiling == "scenario" and refused.stops_scenario
    assert (
        refused.reason
        == f"scenario ceiling ${worst / 2:g} reached (committed $0.0000 + worst case ${worst:.4f})"
    )
    assert gateway.calls == 0


def test_the_policy_checks_run_on_the_raw_text_and_an_answer_over_the_cap_is_journaled_cut(
    journal: SpendJournal,
) -> None:
    policy = Checks(frozenset({0}))
    answer = ok("x" * 40, raw_text="RAW " + "x" * 40, raw_tool_calls=("lookup", '{"q": "RAW"}'))

    outcome = call(journal, Scripted(answer), policy=policy, path={"max_output_bytes": 10})

    assert policy.seen == [["RAW " + "x" * 40, "lookup", '{"q": "RAW"}']]
    assert outcome.policy_failures == 1
    assert outcome.text == "x" * 10 + "\n[evaltrack: output cut at 10 of 40 bytes (bounds.max_output_bytes)]"
    (row,) = journal.rows(build="b1")
    assert read_payload(row.payload) == (outcome.text, None)


def test_without_a_raw_text_the_policy_checks_run_on_the_text_and_without_text_on_nothing(
    journal: SpendJournal, tmp_path: Path
) -> None:
    policy = Checks()
    call(journal, Scripted(ok("plain")), policy=policy)
    tools_only = open_journal(f"sqlite:///{tmp_path / 'tools.sqlite'}")
    call(tools_only, Scripted(ok(None, tool_calls=TOOL_CALLS)), policy=policy)
    tools_only.close()
    assert policy.seen == [["plain"], ["", "lookup", "{}"]]  # a tool-call turn: empty text, and its calls


def test_a_failed_call_is_neither_policy_checked_nor_cut(journal: SpendJournal) -> None:
    policy = Checks()
    outcome = call(
        journal,
        Scripted(failure("InternalServerError", "boom", retryable=True)),
        policy=policy,
        path={"max_output_bytes": 1},
    )
    assert policy.seen == [] and outcome.policy_failures is None and outcome.text is None


def test_preflight_refuses_a_run_with_an_unpriced_model_before_any_call(journal: SpendJournal) -> None:
    spend = SpendPath(journal, Scripted(), run_id="r1")
    spend.preflight([MODEL, MODEL])  # priced: nothing raised
    with pytest.raises(UnpricedModel):
        spend.preflight([MODEL, "nobody/unpriced-model"])


class Counting(Scripted):
    """Records how many threads the process has as each call is made."""

    def __init__(self, *outcomes: CallOutcome):
        super().__init__(*outcomes)
        self.threads: list[int] = []

    async def call(self, spec: CallSpec) -> CallOutcome:
        self.threads.append(threading.active_count())
        return await super().call(spec)


def test_calls_waiting_on_the_journal_hold_no_thread_each(journal: SpendJournal) -> None:
    """64 calls on one event loop: their reservations and settlements wait for the group commit on the
    loop (`reserve_async`, `settle_async`), so the process gains the journal's one writer thread, not a
    thread per waiting call (which took the threads litellm runs each call's synchronous part on)."""
    before = threading.active_count()
    gateway = Counting(*(ok(f"answer {n}") for n in range(64)))
    spend = SpendPath(journal, gateway, run_id="r1", clock=lambda: NOW)

    async def all_at_once() -> list[Any]:
        return await asyncio.gather(*(spend.call(REF, n, SPEC) for n in range(1, 65)))

    outcomes = asyncio.run(all_at_once())

    assert sorted(o.text for o in outcomes) == sorted(f"answer {n}" for n in range(64))
    assert [r.status for r in journal.rows(build="b1")] == ["settled"] * 64
    assert max(gateway.threads) <= before + 1, (before, max(gateway.threads))


def test_a_process_forked_after_a_call_still_makes_calls(journal: SpendJournal, tmp_path: Path) -> None:
    call(journal, Scripted(ok()))  # the journal's writer thread now runs in this process
    pid = os.fork()
    if pid == 0:  # the child: a call on its own journal must settle, not wait for the parent's thread
        signal.alarm(60)  # a hang ends the child with SIGALRM instead of the test run
        try:
            child = open_journal(f"sqlite:///{tmp_path / 'child.sqlite'}")
            outcome = call(child, Scripted(ok("from the child")))
            settled = [r.status for r in child.rows(build="b1")]
            os._exit(0 if outcome.text == "from the child" and settled == ["settled"] else 1)
        except BaseException:  # noqa: BLE001 (the child reports by its exit status only)
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status}"


# --- payloads and cut answers --------------------------------------------------------------------


def test_a_plain_answer_is_journaled_as_plain_text_and_a_failure_as_no_payload() -> None:
    assert journal_payload(ok("just text")) == "just text"
    assert journal_payload(failure("X", "y", retryable=False)) is None
    assert read_payload("just text") == ("just text", None)
    assert read_payload(None) == (None, None)


def test_tool_calls_and_a_policy_count_are_journaled_in_a_tagged_envelope_and_read_back() -> None:
    payload = journal_payload(ok("t", tool_calls=TOOL_CALLS, policy_failures=0))
    assert payload is not None and payload.startswith(ENVELOPE_TAG)
    assert json.loads(payload.removeprefix(ENVELOPE_TAG)) == {
        "text": "t",
        "tool_calls": TOOL_CALLS,
        "policy_failures": 0,
    }
    assert read_payload(payload) == ("t", TOOL_CALLS)

    counted = journal_payload(ok("t", policy_failures=2, policy_hits=frozenset({3, 1})), "sha256:p")
    assert counted is not None
    assert json.loads(counted.removeprefix(ENVELOPE_TAG)) == {
        "text": "t",
        "tool_calls": None,
        "policy_failures": 2,
        "policy_hits": [1, 3],
        "policy_digest": "sha256:p",
    }


def test_a_payload_journaled_before_the_envelope_still_reads_its_tool_calls() -> None:
    old = TOOL_CALLS_TAG + json.dumps({"text": None, "tool_calls": TOOL_CALLS})
    assert read_payload(old) == (None, TOOL_CALLS)


def test_an_answer_that_fits_its_byte_cap_is_kept_whole() -> None:
    assert cut_output("héllo", 6) == "héllo"  # 6 UTF-8 bytes: exactly at the cap
    assert cut_output("héllo", 100) == "héllo"
    assert cut_output("héllo", 5) == "héll\n[evaltrack: output cut at 5 of 6 bytes (bounds.max_output_bytes)]"
    assert cut_reason("héllo") is None


def test_an_answer_over_its_byte_cap_keeps_whole_characters_and_names_both_sizes() -> None:
    cut = cut_output("héllo", 2)  # "h" + the first byte of "é": the half character is dropped
    assert cut == "h\n[evaltrack: output cut at 2 of 6 bytes (bounds.max_output_bytes)]"
    assert cut_output("héllo", 3) == "hé\n[evaltrack: output cut at 3 of 6 bytes (bounds.max_output_bytes)]"
    assert cut_reason(cut) == "output of 6 bytes exceeds bounds.max_output_bytes=2; stored cut, never judged"


def test_an_answer_with_a_lone_surrogate_is_cut_by_its_bytes_never_refused() -> None:
    # a provider's JSON may carry "\\ud800": a str with a lone surrogate (3 bytes with surrogatepass)
    text = "ab\ud800cd"
    assert cut_output(text, 7) == text
    assert cut_output(text, 3) == "ab\n[evaltrack: output cut at 3 of 7 bytes (bounds.max_output_bytes)]"


def test_only_a_marker_at_the_very_end_makes_a_text_cut() -> None:
    marker = "\n[evaltrack: output cut at 2 of 6 bytes (bounds.max_output_bytes)]"
    assert cut_reason(marker + " and more") is None
    assert cut_reason(None) is None
    assert cut_reason("x" + marker) is not None

"""The review queue's table in the journal database, and its exclusive claims (docs/review.md).

`review_items` lives next to the spend journal's tables (the spend journal's URL: SQLite or
PostgreSQL). An item is enqueued once (INSERT .. ON CONFLICT DO NOTHING on its id). A claim is one
conditional UPDATE: it changes the row only while the item is open or its last claim has lapsed,
so of two reviewers racing for one item exactly one changes it (rowcount 1) and the other is told
who holds it. On SQLite the UPDATE runs under the database write lock (BEGIN IMMEDIATE); on
PostgreSQL (READ COMMITTED) the second UPDATE waits for the first's row lock and re-checks its WHERE
against the committed row, which no longer matches. Times are UTC epoch seconds from an injected clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from eval_assets.clock import Clock, utc_now
from eval_assets.redact import name_problem
from eval_assets.spend import JournalError, journal_engine, journal_write

TABLE_NAME = "review_items"
Reason = Literal["uncertain_effect", "parse_failed", "bridge_disagreement", "sample"]
# Lower first: an effect an agent could not confirm (someone must check it), then a verdict nobody
# could read, then where two judge versions disagree, then the sample.
PRIORITY: dict[str, int] = {"uncertain_effect": -1, "parse_failed": 0, "bridge_disagreement": 1, "sample": 2}

_METADATA = sa.MetaData()
_ITEMS = sa.Table(
    TABLE_NAME,
    _METADATA,
    sa.Column("item_id", sa.String, primary_key=True),
    sa.Column("reason", sa.String, nullable=False),
    sa.Column("build", sa.String, nullable=False),
    sa.Column("judge_version", sa.String, nullable=False),
    sa.Column("scenario_id", sa.String, nullable=False),
    sa.Column("repeat", sa.Integer, nullable=False),
    sa.Column("priority", sa.Integer, nullable=False),
    sa.Column("detail", sa.Text, nullable=True),
    sa.Column("enqueued_at", sa.Double, nullable=False),
    sa.Column("state", sa.String, nullable=False),
    sa.Column("claimed_by", sa.String, nullable=True),
    sa.Column("claimed_at", sa.Double, nullable=True),
    sa.Column("expires_at", sa.Double, nullable=True),
    sa.Column("done_by", sa.String, nullable=True),
    sa.Column("done_at", sa.Double, nullable=True),
    sa.Column("score_id", sa.String, nullable=True),
    sa.CheckConstraint("state IN ('open', 'claimed', 'done')", name="ck_review_state"),
    sa.CheckConstraint(
        "reason IN ('uncertain_effect', 'parse_failed', 'bridge_disagreement', 'sample')", name="ck_review_reason"
    ),
    sa.Index("ix_review_items_pick", "state", "priority", "enqueued_at"),
    sa.Index("ix_review_items_build", "build"),
)
_COLUMNS = tuple(c.name for c in _ITEMS.columns)


class ReviewError(Exception):
    """A queue action refused, with the reason (unknown item, not yours, lapsed, done)."""


@dataclass(frozen=True)
class NewItem:
    """An item to enqueue: its id is the attempt under one rubric (`judge_version` is the version that
    routed it; items enqueued before that change were keyed by attempt and judge version)."""

    item_id: str
    reason: Reason
    build: str
    judge_version: str
    scenario_id: str
    repeat: int
    detail: str | None = None


@dataclass(frozen=True)
class ReviewItem:
    item_id: str
    reason: str
    build: str
    judge_version: str
    scenario_id: str
    repeat: int
    priority: int
    detail: str | None
    enqueued_at: float
    state: str
    claimed_by: str | None
    claimed_at: float | None
    expires_at: float | None
    done_by: str | None
    done_at: float | None
    score_id: str | None

    def state_at(self, now: float) -> str:
        """open / claimed / done as of `now` (a lapsed claim is open)."""
        if self.state == "claimed" and (self.expires_at is None or self.expires_at <= now):
            return "open"
        return self.state

    def row(self) -> dict[str, Any]:
        return {c: getattr(self, c) for c in _COLUMNS}


@dataclass(frozen=True)
class ClaimOutcome:
    """`claimed` (this call took it), `held` (the reviewer already held it), `taken` (another reviewer
    holds it: `item` is that item, `holder` who), `done`, or `empty` (nothing open)."""

    status: Literal["claimed", "held", "taken", "done", "empty"]
    item: ReviewItem | None = None
    message: str = ""


def iso(epoch: float | None) -> str:
    return "-" if epoch is None else datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


def _item(m: Any) -> ReviewItem:
    return ReviewItem(**{c: m[c] for c in _COLUMNS})


def _claimable(now: float) -> sa.ColumnElement[bool]:
    return sa.or_(_ITEMS.c.state == "open", sa.and_(_ITEMS.c.state == "claimed", _ITEMS.c.expires_at <= now))


class ReviewStore:
    """The review queue in the journal database at `url` (schema created on open). Raises JournalError."""

    def __init__(self, url: str, *, claim_ttl_s: float, clock: Clock = utc_now) -> None:
        if not claim_ttl_s > 0:
            raise ValueError(f"claim_ttl_s must be > 0, got {claim_ttl_s}")
        self._engine, self.dialect = journal_engine(url)
        self._ttl = float(claim_ttl_s)
        self._clock = clock
        try:
            with journal_write(self._engine) as conn:
                _METADATA.create_all(conn)
                present = {c["name"] for c in sa.inspect(conn).get_columns(TABLE_NAME)}
        except sa.exc.SQLAlchemyError as exc:
            self._engine.dispose()
            raise JournalError(f"cannot open the review queue: {str(exc).splitlines()[0]}") from exc
        if missing := sorted(set(_COLUMNS) - present):
            self._engine.dispose()
            raise JournalError(
                f"the table {TABLE_NAME} lacks columns {missing}: written by an incompatible version"
            )

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> ReviewStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> float:
        return self._clock().timestamp()

    # --- enqueue and read -------------------------------------------------------------------------

    def enqueue(self, items: Iterable[NewItem]) -> int:
        """Insert the items not queued yet (an id already present, in any state, is left alone);
        returns how many were inserted."""
        now = self.now()
        rows = [
            {
                "item_id": i.item_id,
                "reason": i.reason,
                "build": i.build,
                "judge_version": i.judge_version,
                "scenario_id": i.scenario_id,
                "repeat": i.repeat,
                "priority": PRIORITY[i.reason],
                "detail": i.detail,
                "enqueued_at": now,
                "state": "open",
            }
            for i in items
        ]
        if not rows:
            return 0
        insert = (postgresql.insert if self.dialect == "postgresql" else sqlite.insert)(_ITEMS)
        statement = insert.on_conflict_do_nothing(index_elements=["item_id"]).returning(_ITEMS.c.item_id)
        added = 0
        with journal_write(self._engine) as conn:
            for row in rows:  # one row per statement: a returned id says it was new
                added += len(conn.execute(statement, row).fetchall())
        return added

    def get(self, item_id: str) -> ReviewItem | None:
        with self._engine.connect() as conn:
            m = conn.execute(sa.select(_ITEMS).where(_ITEMS.c.item_id == item_id)).mappings().first()
        return None if m is None else _item(m)

    def items(self, *, build: str | None = None) -> list[ReviewItem]:
        query = sa.select(_ITEMS).order_by(_ITEMS.c.priority, _ITEMS.c.enqueued_at, _ITEMS.c.item_id)
        if build is not None:
            query = query.where(_ITEMS.c.build == build)
        with self._engine.connect() as conn:
            return [_item(m) for m in conn.execute(query).mappings()]

    # --- claims -----------------------------------------------------------------------------------

    def claim(self, item_id: str, reviewer: str) -> ClaimOutcome:
        """Claim `item_id` for `reviewer` if it is open (or its claim lapsed): one conditional UPDATE."""
        _check_reviewer(reviewer)
        now = self.now()
        statement = (
            sa.update(_ITEMS)
            .where(_ITEMS.c.item_id == item_id, _claimable(now))
            .values(state="claimed", claimed_by=reviewer, claimed_at=now, expires_at=now + self._ttl)
        )
        with journal_write(self._engine) as conn:
            won = conn.execute(statement).rowcount == 1
        item = self.get(item_id)
        if item is None:
            raise ReviewError(f"no review item {item_id!r}")
        if won:
            return ClaimOutcome("claimed", item, f"claimed {item_id} until {iso(item.expires_at)}")
        if item.state == "done":
            return ClaimOutcome("done", item, f"item {item_id} is done (scored by {item.done_by})")
        if item.claimed_by == reviewer and item.state_at(self.now()) == "claimed":
            return ClaimOutcome("held", item, f"you already hold {item_id} until {iso(item.expires_at)}")
        return ClaimOutcome(
            "taken",
            item,
            f"item {item_id} is taken: claimed by {item.claimed_by} until {iso(item.expires_at)}",
        )

    def claim_next(self, reviewer: str, *, build: str | None = None) -> ClaimOutcome:
        """The reviewer's live claim if any (`held`), else the first open item (priority, then age)
        this call wins. An item another reviewer won meanwhile is skipped; when every open item was
        taken that way, the outcome is `taken`, naming the last one and its holder."""
        _check_reviewer(reviewer)
        now = self.now()
        mine = sa.select(_ITEMS).where(
            _ITEMS.c.state == "claimed", _ITEMS.c.claimed_by == reviewer, _ITEMS.c.expires_at > now
        )
        open_ = sa.select(_ITEMS.c.item_id).where(_claimable(now))
        if build is not None:
            mine, open_ = mine.where(_ITEMS.c.build == build), open_.where(_ITEMS.c.build == build)
        with self._engine.connect() as conn:
            held = conn.execute(mine.order_by(_ITEMS.c.claimed_at).limit(1)).mappings().first()
            if held is not None:
                item = _item(held)
                return ClaimOutcome(
                    "held", item, f"you already hold {item.item_id} until {iso(item.expires_at)}"
                )
            candidates = list(
                conn.execute(
                    open_.order_by(_ITEMS.c.priority, _ITEMS.c.enqueued_at, _ITEMS.c.item_id).limit(64)
                ).scalars()
            )
        lost: ClaimOutcome | None = None
        for item_id in candidates:
            outcome = self.claim(item_id, reviewer)
            if outcome.status in ("claimed", "held"):
                return outcome
            lost = outcome
        if lost is not None and lost.status == "taken":
            return lost
        return ClaimOutcome("empty", None, "no open review item" + (f" for build {build}" if build else ""))

    def release(self, item_id: str, reviewer: str) -> ReviewItem:
        """Return the reviewer's claimed item to the pool. Raises ReviewError (not claimed by them)."""
        _check_reviewer(reviewer)
        statement = (
            sa.update(_ITEMS)
            .where(_ITEMS.c.item_id == item_id, _ITEMS.c.state == "claimed", _ITEMS.c.claimed_by == reviewer)
            .values(state="open", claimed_by=None, claimed_at=None, expires_at=None)
        )
        with journal_write(self._engine) as conn:
            released = conn.execute(statement).rowcount == 1
        item = self.get(item_id)
        if item is None:
            raise ReviewError(f"no review item {item_id!r}")
        if not released:
            raise ReviewError(f"item {item_id} is {self._whose(item)}: only its holder can release it")
        return item

    def live_claim(self, item_id: str, reviewer: str) -> ReviewItem:
        """The item, if `reviewer` holds a live claim on it. Raises ReviewError saying why not."""
        item = self.get(item_id)
        if item is None:
            raise ReviewError(f"no review item {item_id!r}")
        if item.state != "claimed" or item.claimed_by != reviewer or item.state_at(self.now()) != "claimed":
            raise ReviewError(
                f"item {item_id} is {self._whose(item)}: claim it first (`evaltrack review next`)"
            )
        return item

    def complete(self, item_id: str, reviewer: str, score_id: str) -> ReviewItem:
        """Mark the reviewer's live claim done with its stored score. Raises ReviewError when the claim
        is not (or no longer) theirs."""
        now = self.now()
        statement = (
            sa.update(_ITEMS)
            .where(
                _ITEMS.c.item_id == item_id,
                _ITEMS.c.state == "claimed",
                _ITEMS.c.claimed_by == reviewer,
                _ITEMS.c.expires_at > now,
            )
            .values(state="done", done_by=reviewer, done_at=now, score_id=score_id)
        )
        with journal_write(self._engine) as conn:
            done = conn.execute(statement).rowcount == 1
        item = self.get(item_id)
        if item is None or not done:
            raise ReviewError(
                f"item {item_id} is {'gone' if item is None else self._whose(item)}: it was not marked done"
            )
        return item

    def _whose(self, item: ReviewItem) -> str:
        state = item.state_at(self.now())
        if state == "done":
            return f"done (scored by {item.done_by})"
        if state == "claimed":
            return f"claimed by {item.claimed_by} until {iso(item.expires_at)}"
        if item.state == "claimed":
            return f"open (the claim of {item.claimed_by} lapsed at {iso(item.expires_at)})"
        return "open (not claimed)"


def _check_reviewer(reviewer: str) -> None:
    """A reviewer is a printable name holding no credential (it is stored in review_items_history);
    the refusal never repeats a refused value."""
    if (why := name_problem(reviewer)) is not None:
        raise ReviewError(f"reviewer: {why}")
    if not reviewer.strip() or reviewer != reviewer.strip() or len(reviewer) > 200:
        raise ReviewError(
            f"reviewer {reviewer!r}: give a name (no surrounding spaces, at most 200 characters)"
        )


def rows_of(items: Sequence[ReviewItem]) -> list[dict[str, Any]]:
    return [i.row() for i in items]

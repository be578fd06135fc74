"""The journal's tables and statements (SQLAlchemy Core; the PostgreSQL batch statements as SQL
text), and the one-time migration to running totals."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ._keys import Role
from ._values import AttemptStatus, CeilingName, JournalRow, LeaseRow, _as_utc, _nusd, _scope_keys

TABLE_NAME = "spend_journal"


TOTALS_TABLE_NAME = "spend_totals"


_METADATA = sa.MetaData()


_TABLE = sa.Table(
    TABLE_NAME,
    _METADATA,
    sa.Column("attempt_key", sa.String, primary_key=True),
    sa.Column("run_id", sa.String, nullable=False),
    sa.Column("build", sa.String, nullable=False),
    sa.Column("judge_version", sa.String, nullable=True),
    sa.Column("scenario_id", sa.String, nullable=False),
    sa.Column("repeat", sa.Integer, nullable=False),
    sa.Column("role", sa.String, nullable=False),
    sa.Column("try_no", sa.Integer, nullable=False),
    sa.Column("generation", sa.Integer, nullable=False),
    sa.Column("model", sa.String, nullable=False),
    sa.Column("status", sa.String, nullable=False),
    sa.Column("ceiling", sa.String, nullable=True),
    sa.Column("reserved_usd", sa.Double, nullable=False),
    sa.Column("cost_usd", sa.Double, nullable=True),
    sa.Column("prompt_tokens", sa.Integer, nullable=True),
    sa.Column("completion_tokens", sa.Integer, nullable=True),
    sa.Column("day", sa.String(10), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("payload", sa.Text, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.CheckConstraint("status IN ('reserved', 'settled', 'failed', 'refused')", name="ck_status"),
    sa.CheckConstraint("role IN ('subject', 'judge')", name="ck_role"),
    # For `rows(build=..., judge_version=...)`. Ceiling checks read `spend_totals`, never these rows.
    sa.Index("ix_spend_journal_build", "build", "judge_version"),
)


# Covering indexes of journals written before `spend_totals` existed: their ceiling sums read them.
# They index `status` and `cost_usd`, which every settlement changes; dropped when the totals arrive.
_OBSOLETE_INDEXES = ("ix_spend_journal_day", "ix_spend_journal_suite")


_TOTALS = sa.Table(
    TOTALS_TABLE_NAME,
    _METADATA,
    sa.Column("scope", sa.String, primary_key=True),
    sa.Column("scope_key", sa.String, primary_key=True),
    # Integer nano-USD (1e-9 USD): sums of integers are exact and independent of the order of the
    # additions, so a total never drifts from the sum of its rows however many updates it took.
    sa.Column("spent_nusd", sa.BigInteger, nullable=False),
    sa.Column("outstanding_nusd", sa.BigInteger, nullable=False),
    sa.CheckConstraint("scope IN ('scenario', 'suite', 'day')", name="ck_spend_totals_scope"),
)


# Statements are built once, with bound parameters: building and cache-keying a statement per call
# costs several times what executing it does, and writes run under a lock.
_COLUMN_NAMES = tuple(c.name for c in _TABLE.columns)


_SELECT_ROW = sa.select(_TABLE).where(_TABLE.c.attempt_key == sa.bindparam("b_key"))


_SELECT_ROWS = (
    sa.select(_TABLE)
    .where(_TABLE.c.attempt_key.in_(sa.bindparam("b_keys", expanding=True)))
    .order_by(_TABLE.c.attempt_key)
)


# PostgreSQL: locks the rows a batch settles, in key order (no other settlement changes them meanwhile).
_SELECT_ROWS_FOR_UPDATE = _SELECT_ROWS.with_for_update()


_INSERT_ROW = sa.insert(_TABLE)


# Updates of a stored row, which must still have the status it was read with (the batch checks the
# row count). A settlement writes only what settling changes; a refused key reserved again, every column.
_SETTLED_COLUMNS = (
    "status",
    "cost_usd",
    "prompt_tokens",
    "completion_tokens",
    "settled_at",
    "payload",
    "error",
)


_UPDATE_COLUMNS = {
    "reserved": _SETTLED_COLUMNS,
    "refused": tuple(name for name in _COLUMN_NAMES if name != "attempt_key"),
}


_UPDATE_ROW = {
    status: sa.update(_TABLE)
    .where(_TABLE.c.attempt_key == sa.bindparam("b_key"), _TABLE.c.status == status)
    .values({name: sa.bindparam(name) for name in columns})
    for status, columns in _UPDATE_COLUMNS.items()
}


# Scopes in the order their totals rows are written (and so locked, on PostgreSQL): one global order
# for every transaction, so two writers never wait on each other's totals rows in a cycle.
_SCOPES: tuple[CeilingName, ...] = ("day", "suite", "scenario")


_SCOPE_RANK = {scope: rank for rank, scope in enumerate(_SCOPES)}


# The committed nano-USD of the given scopes (a scope without a row has committed nothing). One
# statement, so on PostgreSQL every total comes from one snapshot, taken after the reservation lock.
_SELECT_COMMITTED = sa.union_all(
    *(
        sa.select(
            _TOTALS.c.scope, _TOTALS.c.scope_key, _TOTALS.c.spent_nusd + _TOTALS.c.outstanding_nusd
        ).where(
            _TOTALS.c.scope == scope,
            _TOTALS.c.scope_key.in_(sa.bindparam(f"k_{scope}", expanding=True)),
        )
        for scope in _SCOPES
    )
)


# Adds (d_spent, d_outstanding) nano-USD to one total, creating its row. The SET is relative
# (`total = total + delta`), never a value computed from an earlier read: on PostgreSQL the UPDATE
# applies the delta to the newest committed version of the row, after waiting for any writer holding
# it, so concurrent transactions never lose an update. Plain SQL, the same on both dialects.
_UPSERT_TOTAL = sa.text(
    f"INSERT INTO {TOTALS_TABLE_NAME} (scope, scope_key, spent_nusd, outstanding_nusd)"
    " VALUES (:scope, :scope_key, :d_spent, :d_outstanding)"
    " ON CONFLICT (scope, scope_key) DO UPDATE SET"
    f" spent_nusd = {TOTALS_TABLE_NAME}.spent_nusd + excluded.spent_nusd,"
    f" outstanding_nusd = {TOTALS_TABLE_NAME}.outstanding_nusd + excluded.outstanding_nusd"
).bindparams(
    sa.bindparam("d_spent", type_=sa.BigInteger),
    sa.bindparam("d_outstanding", type_=sa.BigInteger),
)


# PostgreSQL: the same writes as one statement each, whatever the batch size, from one array per
# column (psycopg sends a list as an array): one Bind/Execute instead of one per row.
_PG_TYPES = {
    sa.String: "TEXT",
    sa.Text: "TEXT",
    sa.Integer: "INTEGER",
    sa.BigInteger: "BIGINT",
    sa.Double: "DOUBLE PRECISION",
    sa.DateTime: "TIMESTAMPTZ",
}


def _pg_unnest(columns: Mapping[str, str], alias: str) -> str:
    """`unnest(CAST(:c AS T[]), ...) WITH ORDINALITY AS alias(c, ..., n)` for parameters named c."""
    arrays = ", ".join(f"CAST(:{name} AS {pg_type}[])" for name, pg_type in columns.items())
    return f"unnest({arrays}) WITH ORDINALITY AS {alias}({', '.join(columns)}, n)"


def _pg_type(name: str) -> str:
    column_type = type(_TABLE.c[name].type)
    return next(sql for python, sql in _PG_TYPES.items() if issubclass(column_type, python))


_PG_INSERT_ROWS = sa.text(
    f"INSERT INTO {TABLE_NAME} ({', '.join(_COLUMN_NAMES)}) SELECT {', '.join(_COLUMN_NAMES)} FROM "
    + _pg_unnest({name: _pg_type(name) for name in _COLUMN_NAMES}, "u")
    + " ORDER BY n"
)


_PG_SETTLE_ROWS = sa.text(
    f"UPDATE {TABLE_NAME} AS j SET {', '.join(f'{name} = u.{name}' for name in _SETTLED_COLUMNS)} FROM "
    + _pg_unnest({"b_key": "TEXT", **{name: _pg_type(name) for name in _SETTLED_COLUMNS}}, "u")
    + " WHERE j.attempt_key = u.b_key AND j.status = 'reserved'"
)


_PG_UPSERT_TOTALS = sa.text(
    f"INSERT INTO {TOTALS_TABLE_NAME} (scope, scope_key, spent_nusd, outstanding_nusd)"
    " SELECT scope, scope_key, d_spent, d_outstanding FROM "
    + _pg_unnest({"scope": "TEXT", "scope_key": "TEXT", "d_spent": "BIGINT", "d_outstanding": "BIGINT"}, "u")
    + " ORDER BY n ON CONFLICT (scope, scope_key) DO UPDATE SET"
    f" spent_nusd = {TOTALS_TABLE_NAME}.spent_nusd + excluded.spent_nusd,"
    f" outstanding_nusd = {TOTALS_TABLE_NAME}.outstanding_nusd + excluded.outstanding_nusd"
)


_SELECT_DAY_TOTAL = sa.select(_TOTALS.c.spent_nusd, _TOTALS.c.outstanding_nusd).where(
    _TOTALS.c.scope == "day", _TOTALS.c.scope_key == sa.bindparam("k_day")
)


_SELECT_TOTALS = sa.select(_TOTALS).order_by(_TOTALS.c.scope, _TOTALS.c.scope_key)


LEASES_TABLE_NAME = "run_leases"


_LEASES = sa.Table(
    LEASES_TABLE_NAME,
    _METADATA,
    sa.Column("build", sa.String, primary_key=True),
    sa.Column("asset", sa.String, primary_key=True),
    sa.Column("partition_key", sa.String, primary_key=True),
    sa.Column("holder", sa.String, nullable=False),  # process_holder(): host:pid:token
    sa.Column("host", sa.String, nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("run_id", sa.String, nullable=True),
    sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
)


def _lease_from_mapping(m: Mapping[Any, Any]) -> LeaseRow:
    moments = [_as_utc(m[name]) for name in ("acquired_at", "heartbeat_at", "expires_at")]
    assert all(moment is not None for moment in moments)  # NOT NULL columns
    return LeaseRow(
        m["build"],
        m["asset"],
        m["partition_key"],
        m["holder"],
        m["host"],
        int(m["pid"]),
        m["run_id"],
        *cast("list[datetime]", moments),
    )


def _select_row(conn: Connection, key: str) -> JournalRow | None:
    found = conn.execute(_SELECT_ROW, {"b_key": key}).mappings().first()
    return None if found is None else _row_from_mapping(found)


def _columns(records: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Row dicts (all with the same keys) as one list per key: the arrays of a `_pg_unnest`."""
    return {name: [record[name] for record in records] for name in records[0]}


def _row_values(row: JournalRow | None, columns: tuple[str, ...]) -> dict[str, Any]:
    assert row is not None
    return {name: getattr(row, name) for name in columns}


def _migrate_to_totals(conn: Connection) -> None:
    """Fill the just-created `spend_totals` from the rows of a journal written before it existed.

    Runs in the schema transaction, under the write lock (SQLite) or reservation lock (PostgreSQL),
    so no reservation of this version runs meanwhile. Each row counts as `_nusd` of its committed
    amount, exactly as `reserve` and `settle` add it, so the totals equal a from-rows recomputation.
    Then swaps the covering indexes the row sums needed for the one `rows()` needs.
    """
    totals: dict[tuple[str, str], list[int]] = {}
    columns = (
        _TABLE.c.build,
        _TABLE.c.judge_version,
        _TABLE.c.scenario_id,
        _TABLE.c.generation,
        _TABLE.c.day,
        _TABLE.c.status,
        _TABLE.c.reserved_usd,
        _TABLE.c.cost_usd,
    )
    query = sa.select(*columns).where(_TABLE.c.status != "refused")
    for row in conn.execute(query, execution_options={"yield_per": 10_000}).mappings():
        if row["status"] == "reserved":
            delta = (0, _nusd(row["reserved_usd"]))
        else:  # settled or failed
            delta = (_nusd(row["cost_usd"] or 0.0), 0)
        keys = _scope_keys(
            row["build"], row["judge_version"], row["scenario_id"], row["generation"], row["day"]
        )
        for scope, key in keys.items():
            total = totals.setdefault((scope, key), [0, 0])
            total[0] += delta[0]
            total[1] += delta[1]
    if totals:
        conn.execute(
            sa.insert(_TOTALS),
            [
                {"scope": scope, "scope_key": key, "spent_nusd": spent, "outstanding_nusd": outstanding}
                for (scope, key), (spent, outstanding) in totals.items()
            ],
        )
    for name in _OBSOLETE_INDEXES:
        conn.execute(sa.text(f"DROP INDEX IF EXISTS {name}"))
    for index in _TABLE.indexes:
        index.create(conn, checkfirst=True)


def _row_from_mapping(m: Mapping[Any, Any]) -> JournalRow:
    created_at = _as_utc(m["created_at"])
    assert created_at is not None  # NOT NULL column
    return JournalRow(
        attempt_key=m["attempt_key"],
        run_id=m["run_id"],
        build=m["build"],
        judge_version=m["judge_version"],
        scenario_id=m["scenario_id"],
        repeat=int(m["repeat"]),
        role=cast(Role, m["role"]),
        try_no=int(m["try_no"]),
        generation=int(m["generation"]),
        model=m["model"],
        status=cast(AttemptStatus, m["status"]),
        ceiling=cast("CeilingName | None", m["ceiling"]),
        reserved_usd=float(m["reserved_usd"]),
        cost_usd=None if m["cost_usd"] is None else float(m["cost_usd"]),
        prompt_tokens=m["prompt_tokens"],
        completion_tokens=m["completion_tokens"],
        day=m["day"],
        created_at=created_at,
        settled_at=_as_utc(m["settled_at"]),
        payload=m["payload"],
        error=m["error"],
    )

"""The spend journal and the one spend path: what every model call costs, reserved before and settled
after, on SQLite or PostgreSQL.

`_keys`: attempt identity; `_values`: what the journal stores and returns; `_schema`: its tables and
statements; `_batch`: group commit; `_backends`: SQLite and PostgreSQL; `_leases`: lease holders;
`_journal`: the journal; `_location`: where the journal is (its URL, its SQLite file); `_path`: reserve -> call -> settle. Why the journal is correct: docs/journal.md.
"""

from ._backends import DEFAULT_LOCK_WAIT_S, WriteTurn, journal_engine, journal_write
from ._journal import HeldLease, SpendJournal, hold_lease, open_journal
from ._keys import TURN_STRIDE, AttemptKey, AttemptRef, Role, attempt_id
from ._leases import pid_alive, process_holder
from ._location import journal_file, journal_url
from ._path import (
    RETRYABLE_TAG,
    Policy,
    Refused,
    Reused,
    SpendPath,
    cut_output,
    cut_reason,
    journal_payload,
    read_payload,
)
from ._values import (
    AttemptStatus,
    CeilingName,
    Ceilings,
    JournalError,
    JournalRow,
    LeaseGrant,
    LeaseHeld,
    LeaseRow,
    Refusal,
    Reservation,
    ScopeTotal,
    scope_keys,
)

__all__ = [
    "DEFAULT_LOCK_WAIT_S",
    "RETRYABLE_TAG",
    "TURN_STRIDE",
    "AttemptKey",
    "AttemptRef",
    "AttemptStatus",
    "CeilingName",
    "Ceilings",
    "HeldLease",
    "JournalError",
    "JournalRow",
    "LeaseGrant",
    "LeaseHeld",
    "LeaseRow",
    "Policy",
    "Refusal",
    "Refused",
    "Reservation",
    "Reused",
    "Role",
    "ScopeTotal",
    "SpendJournal",
    "SpendPath",
    "WriteTurn",
    "attempt_id",
    "cut_output",
    "cut_reason",
    "hold_lease",
    "journal_engine",
    "journal_file",
    "journal_payload",
    "journal_url",
    "read_payload",
    "journal_write",
    "open_journal",
    "pid_alive",
    "process_holder",
    "scope_keys",
]

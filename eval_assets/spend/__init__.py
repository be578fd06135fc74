"""The spend journal and the one spend path: what every model call costs, reserved before and settled
after, on SQLite or PostgreSQL.

`_keys`: attempt identity; `_journal`: the journal (ceilings, group commit, leases, backends);
`_path`: reserve -> call -> settle. Why the journal is correct: docs/journal.md.
"""

from ._journal import (
    AttemptStatus,
    CeilingName,
    Ceilings,
    HeldLease,
    JournalError,
    JournalRow,
    LeaseGrant,
    LeaseHeld,
    LeaseRow,
    Refusal,
    Reservation,
    ScopeTotal,
    SpendJournal,
    SpendTotal,
    hold_lease,
    open_journal,
    pid_alive,
    process_holder,
    scope_keys,
)
from ._keys import TURN_STRIDE, AttemptKey, AttemptRef, Role, attempt_id
from ._path import RETRYABLE_TAG, Refused, Reused, SpendPath, cut_output, cut_reason, journal_payload

__all__ = [
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
    "Refusal",
    "Refused",
    "Reservation",
    "Reused",
    "Role",
    "ScopeTotal",
    "SpendJournal",
    "SpendPath",
    "SpendTotal",
    "attempt_id",
    "cut_output",
    "cut_reason",
    "hold_lease",
    "journal_payload",
    "open_journal",
    "pid_alive",
    "process_holder",
    "scope_keys",
]

"""The human review queue (docs/review.md): items routed to people, exclusive claims in the journal
database, and scores stored as `source: human` rows of `human_scores`.

`_store`: the `review_items` table and its claims (SQLite and PostgreSQL); `_queue`: what is
enqueued, what a reviewer sees, what a submission stores, the warehouse export.
"""

from ._queue import (
    DATASET,
    FillSummary,
    SubmitResult,
    UncertainEffects,
    bridge_disagreements,
    candidates,
    export,
    fill,
    item_id,
    judge_version_item_id,
    keyed_by_rubric,
    open_store,
    parse_scores,
    present,
    sample,
    sample_rank,
    submit,
)
from ._store import PRIORITY, ClaimOutcome, NewItem, ReviewError, ReviewItem, ReviewStore, iso

__all__ = [
    "DATASET",
    "PRIORITY",
    "ClaimOutcome",
    "FillSummary",
    "NewItem",
    "ReviewError",
    "ReviewItem",
    "ReviewStore",
    "SubmitResult",
    "UncertainEffects",
    "bridge_disagreements",
    "candidates",
    "export",
    "fill",
    "item_id",
    "iso",
    "judge_version_item_id",
    "keyed_by_rubric",
    "open_store",
    "parse_scores",
    "present",
    "sample",
    "sample_rank",
    "submit",
]

"""Where the spend journal is: the one reading of its URL, for every caller that opens or looks for it.

A caller's own URL first (a test's, or `EvalTrackResource.journal_url`), else the project's
`spend.journal_url`, else the SQLite file `journal.sqlite` under EVAL_HOME. `journal_file` tells a SQLite
journal (its file) from another database with SQLAlchemy's own URL parser, so a URL naming its driver
(`sqlite+pysqlite:///...`) is a SQLite file like `sqlite:///...`.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

JOURNAL_FILE = "journal.sqlite"
"""The default journal's file name under EVAL_HOME."""


def journal_url(home: Path, configured: str | None = None, given: str | None = None) -> str:
    """The journal's URL: `given`, else `configured` (the project's `spend.journal_url`), else
    `sqlite:///<home>/journal.sqlite`. An empty string counts as not given."""
    return given or configured or f"sqlite:///{home / JOURNAL_FILE}"


def journal_file(url: str) -> Path | None:
    """The file a SQLite journal URL names, whatever driver it names; None for another database, an
    in-memory or URI-named SQLite database, or a URL SQLAlchemy cannot read (opening it says what is wrong)."""
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        return None
    return sqlite_file(parsed)


def sqlite_file(parsed: sa.URL) -> Path | None:
    """`journal_file` of a parsed URL (the opener, `_backends`, reads the same file from it)."""
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if database.startswith("file:"):
        return None
    return Path(database)

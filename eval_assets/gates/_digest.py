"""One content digest for the gates that remember a result while the files it depends on are unchanged
(the property gates' `_HELD`, the import probe's `_PROBED`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path


def files_digest(files: Iterable[tuple[Path, Path]]) -> str:
    """SHA-256 over each (base, path)'s path relative to its base and its bytes, in the order given:
    any changed, added or removed file changes it."""
    digest = hashlib.sha256()
    for base, path in files:
        digest.update(path.relative_to(base).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()

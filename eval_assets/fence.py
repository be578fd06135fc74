"""Fences: untrusted content (scenario input, subject output) shown to a judge between an opening and
a closing line it cannot forge, and read back out of a rendered prompt.

A leaf: the judge prompt renderer fences with it; the sim judge reads its fences back.
"""

from __future__ import annotations

import hashlib
import hmac
import re

NONCE_CHARS = 32
FENCE_LABELS = ("SCENARIO INPUT", "SUBJECT OUTPUT")
# The literal delimiter characters (and so any verdict tag) are neutralised inside fenced content.
# Look-alikes need no list: a closing line carries the per-call nonce, which the content cannot know.
_NEUTRALISE = str.maketrans({"<": "\u2039", ">": "\u203a"})


def fence_nonce(secret: bytes, attempt: str) -> str:
    """The fence nonce of one judge attempt: HMAC-SHA256(`secret`, `attempt`), hex, `NONCE_CHARS` long.

    `secret` is the EVAL_HOME's fence secret (`EvalHome.fence_secret`), which no subject can read, so
    no output can predict its own closing line; the same attempt renders the same prompt on a re-run.
    """
    if len(secret) < 16:
        raise ValueError("the fence secret must be at least 16 bytes")
    return hmac.new(secret, attempt.encode(), hashlib.sha256).hexdigest()[:NONCE_CHARS]


def fence(label: str, content: str, nonce: str) -> str:
    """Wrap untrusted `content` between an opening and a closing line that carry `nonce`.

    The content cannot close its fence (it does not know the nonce; a nonce that appears in it anyway
    is replaced) and cannot open a verdict tag (`<` and `>` are neutralised).
    """
    if not re.fullmatch(r"[0-9a-f]{16,64}", nonce):
        raise ValueError(f"a fence nonce is 16-64 lowercase hex digits, not {nonce!r}")
    safe = content.translate(_NEUTRALISE).replace(nonce, "[nonce]")
    return f"<<<UNTRUSTED {label} {nonce}>>>\n{safe}\n<<<END UNTRUSTED {label} {nonce}>>>"


def fenced_content(prompt: str, label: str) -> str | None:
    """The content of the fence `label` in a rendered prompt, or None when it has no such fence.

    The opening and closing lines must carry the same nonce; fenced content holds no `<`, so no text
    inside another fence can pass for these lines.
    """
    pattern = re.compile(
        rf"^<<<UNTRUSTED {re.escape(label)} ([0-9a-f]{{16,64}})>>>\n(.*?)\n<<<END UNTRUSTED {re.escape(label)} \1>>>$",
        re.MULTILINE | re.DOTALL,
    )
    match = pattern.search(prompt)
    return None if match is None else match.group(2)

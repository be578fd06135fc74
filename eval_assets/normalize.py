"""The one normalization and decoding of text, shared by the policy checks (`judging`) and the one
redaction (`redact`): what one finds hidden, the other finds too.

- `drop_invisible(text)`: every Unicode default-ignorable code point removed (by the property,
  `\\p{Default_Ignorable_Code_Point}` of the `regex` module: zero-width characters, bidi controls and
  isolates, variation selectors, tag characters, Hangul fillers, Mongolian and Khmer invisible
  signs, ...), and U+2800 BRAILLE PATTERN BLANK (not default-ignorable, but renders as nothing).
- `fold(text)`: `drop_invisible`, NFKC, each character mapped to its UTS #39 skeleton prototype
  (Unicode's confusables data as shipped by `confusable-homoglyphs`) around a case fold, whitespace
  runs as one space. A forbidden string and a text are compared folded.
- `decoded_views(text)`: the text and what it decodes to: URL escapes (`%41`, `+`), JSON and
  Python escapes (`\\u002d`, `\\x41`, `\\n`, surrogate pairs), HTML entities, quoted-printable
  (`=41`, soft line breaks), hex runs (`4e57...`, `4e:57:...`, either alignment), base64 tokens
  (standard or URL alphabet, padded or not, at the alignment that decodes to text, glued to a word
  or not), and base64 wrapped over lines (MIME) once its line breaks are joined; nested to
  `MAX_DEPTH` decodings, at most `MAX_VIEWS` views. Where a decoding is ambiguous, each reading is
  a view of its own, and a match in any view counts.

Every step is linear in the text: each decoding is one pass of a pattern with no unbounded retry,
and no decoding lengthens a text, so a text of n characters costs at most `MAX_VIEWS` passes of
each decoder over n characters (`benchmarks/policy_pass.py` measures it).
"""

from __future__ import annotations

import base64
import binascii
import functools
import html
import re
import unicodedata
import urllib.parse
from collections.abc import Callable, Iterator

import regex

NORMALIZATION = "evaltrack-normalize/1 depth=3 views=24"
"""Names this normalization in every policy digest: a change to it re-checks what was checked under it."""
MAX_DEPTH = 3
"""Decodings applied one inside another (base64 of a URL-encoded JSON string is three)."""
MAX_VIEWS = 24
"""Views of one text at most (the text itself included); past it, no further view is made."""

_INVISIBLE = regex.compile(r"[\p{Default_Ignorable_Code_Point}\u2800]+")
_SPACE_RUN = re.compile(r"\s+")


def drop_invisible(text: str) -> str:
    """`text` without its default-ignorable code points (and U+2800)."""
    return _INVISIBLE.sub("", text)


@functools.cache
def _skeleton_table() -> dict[int, str]:
    """character -> its confusables prototype, from Unicode's confusables data.

    The data lists each (source, prototype) pair both ways; a source has exactly one prototype and a
    prototype is never a source, so a character linked to one partner that is a prototype (linked to
    several, or a sequence) is that partner's source. A pair linked only to each other maps to the
    smaller of the two: either is a consistent representative."""
    from confusable_homoglyphs import utils as confusables

    links: dict[str, set[str]] = {}
    for key, entries in confusables.load("confusables.json").items():
        key = key.replace("\u200e", "").replace("\u200f", "")
        for entry in entries:
            links.setdefault(key, set()).add(str(entry["c"]).replace("\u200e", "").replace("\u200f", ""))
    table: dict[int, str] = {}
    for char, partners in links.items():
        if len(char) != 1 or len(partners) != 1:
            continue
        (partner,) = partners
        if not partner or partner == char:
            continue
        if len(partner) == 1 and len(links.get(partner, ())) == 1 and partner > char:
            continue  # a pair: the larger maps to the smaller
        table[ord(char)] = unicodedata.normalize("NFD", partner)
    return table


def skeleton(text: str) -> str:
    """Each character of `text` (decomposed, NFD) replaced by its confusables prototype."""
    return unicodedata.normalize("NFD", text).translate(_skeleton_table())


def fold(text: str) -> str:
    """The form a forbidden string and a text are compared in (see the module)."""
    text = unicodedata.normalize("NFKC", drop_invisible(text))
    text = skeleton(skeleton(text).casefold()).casefold()
    return _SPACE_RUN.sub(" ", unicodedata.normalize("NFKC", text)).strip()


# --- decoders: each returns the decoded readings of a text (none when nothing decodes) -------------

_MOSTLY_TEXT_BAD = re.compile(r"[\ufffd\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _as_text(raw: bytes) -> str | None:
    """`raw` as UTF-8 when it is mostly text (at most a quarter replacement or control characters:
    a token glued to a word decodes with a few bad bytes in front; at least 4 good ones), else None."""
    text = raw.decode("utf-8", "replace")
    bad = len(_MOSTLY_TEXT_BAD.findall(text))
    return text if bad * 4 <= len(text) and len(text) - bad >= 4 else None


def plain_form(text: str) -> str:
    """`text` without invisible characters, NFKC-normalized (fullwidth and compatibility forms)."""
    return unicodedata.normalize("NFKC", drop_invisible(text))


def _plain(text: str) -> list[str]:
    return [plain_form(text)]


def _url(text: str) -> list[str]:
    if "%" not in text and "+" not in text:
        return []
    return [urllib.parse.unquote(text), urllib.parse.unquote_plus(text)]


_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})|\\x([0-9a-fA-F]{2})|\\([nrtbf\"'\\/])")
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", '"': '"', "'": "'", "\\": "\\", "/": "/"}


def _escape(m: re.Match[str]) -> str:
    if m[4] is not None:
        return _SIMPLE[m[4]]
    code = int(m[1] or m[2] or m[3], 16)
    return chr(code) if code <= 0x10FFFF else "\ufffd"


def unescaped(text: str) -> str:
    """`text` with JSON and Python escapes decoded (`\\u002d`, `\\x41`, `\\n`, surrogate pairs)."""
    if "\\" not in text:
        return text
    decoded = _ESCAPE.sub(_escape, text)
    # escaped surrogate pairs (`\ud83d\ude00`) joined; a lone one becomes U+FFFD
    return decoded.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _json(text: str) -> list[str]:
    return [unescaped(text)] if "\\" in text else []


def _html(text: str) -> list[str]:
    return [html.unescape(text)] if "&" in text else []


_QP_SOFT_BREAK = re.compile(r"=\r?\n")
_QP_RUN = re.compile(r"(?:=[0-9A-Fa-f]{2})++")


def _quoted_printable(text: str) -> list[str]:
    if "=" not in text:
        return []

    def run(m: re.Match[str]) -> str:
        return bytes.fromhex(m[0].replace("=", "")).decode("utf-8", "replace")

    return [_QP_RUN.sub(run, _QP_SOFT_BREAK.sub("", text))]


_HEX_RUN = re.compile(r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{2}(?:[ :]?+[0-9A-Fa-f]{2}){3,}+[0-9A-Fa-f]?")


def _hex(text: str) -> list[str]:
    runs = list(_HEX_RUN.finditer(text))
    if not runs:
        return []
    out = []
    for shift in (0, 1):  # a run glued to a hex letter: either alignment
        parts, at = [], 0
        for m in runs:
            digits = m[0].replace(" ", "").replace(":", "")
            body = digits[shift:]
            decoded = _as_text(bytes.fromhex(body[: len(body) // 2 * 2]))
            if decoded is not None:
                parts += [text[at : m.start()], digits[:shift], decoded]
                at = m.end()
        out.append("".join(parts) + text[at:])
    return out


_B64_TOKEN = re.compile(r"[A-Za-z0-9+/_-]{8,}+={0,2}")
_B64_LINE_BREAK = re.compile(r"(?<=[A-Za-z0-9+/=])[ \t]*+\r?\n[ \t]*+(?=[A-Za-z0-9+/])")
_URL_SAFE = str.maketrans("-_", "+/")


_UPPER = re.compile(r"[A-Z]")
_LOWER = re.compile(r"[a-z]")


def _b64_token(m: re.Match[str]) -> str:
    token = m[0]
    if _UPPER.search(token) is None or _LOWER.search(token) is None:
        return token  # base64 of text mixes cases; a one-case word is a word
    best: tuple[int, str] | None = None
    for shift in range(4):  # a token glued to a word: the alignment that decodes to text
        body = token[shift:].rstrip("=").translate(_URL_SAFE)
        body = body[: len(body) // 4 * 4] if len(body) % 4 == 1 else body
        if len(body) < 8:
            break
        try:
            raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        decoded = _as_text(raw)
        if decoded is not None:
            bad = len(_MOSTLY_TEXT_BAD.findall(decoded))
            if best is None or bad < best[0]:
                best = (bad, token[:shift] + decoded)
            if bad == 0:
                break
    return token if best is None else best[1]


def _base64(text: str) -> list[str]:
    out = [_B64_TOKEN.sub(_b64_token, text)]
    joined = _B64_LINE_BREAK.sub("", text)
    if joined != text:  # base64 wrapped over lines (MIME's 76 columns, or any width)
        out.append(_B64_TOKEN.sub(_b64_token, joined))
    return out


DECODERS: tuple[tuple[str, Callable[[str], list[str]]], ...] = (
    ("invisible characters and compatibility forms", _plain),
    ("URL escapes", _url),
    ("JSON and Python escapes", _json),
    ("HTML entities", _html),
    ("quoted-printable", _quoted_printable),
    ("hex", _hex),
    ("base64", _base64),
)
"""The decodings `decoded_views` applies, nested (name, readings of a text)."""


def decoded_views(text: str, *, depth: int = MAX_DEPTH, limit: int = MAX_VIEWS) -> list[str]:
    """`text` first, then its distinct decoded readings, breadth first, nested up to `depth`
    decodings, at most `limit` views in all."""
    return list(_views(text, depth, limit))


def _views(text: str, depth: int, limit: int) -> Iterator[str]:
    seen = {text}
    yield text
    frontier = [text]
    for _ in range(depth):
        following: list[str] = []
        for current in frontier:
            for _name, decode in DECODERS:
                for view in decode(current):
                    if view and view not in seen:
                        seen.add(view)
                        yield view
                        if len(seen) >= limit:
                            return
                        following.append(view)
        frontier = following


def folded_views(text: str) -> list[str]:
    """`fold` of each of `decoded_views(text)`, distinct: what a forbidden string is looked for in."""
    return list(dict.fromkeys(fold(v) for v in decoded_views(text)))

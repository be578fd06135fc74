"""The one redaction: credentials out of every text that is persisted, logged or sent on to a judge.

Two kinds of match, both replaced by `[redacted]` (the name of a `key=value` or header is kept):

- by **value**: the current value of every credential-bearing environment variable the process holds
  (`*_API_KEY`, `*_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`, `*_CREDENTIALS`, ...) and every value
  registered with `register_secret` (credentials from configs). This is what catches a key that has no
  known shape, echoed back by a provider or a proxy.
- by **shape**: provider keys (`sk-`/`pk-`/`rk-`, `sk_live_`, `AIza`, `xox?-`, `gh?_`, AWS key ids,
  JSON web tokens), PEM private-key bodies, URL userinfo (`scheme://user:<password>@host`), `Authorization`
  headers and `Bearer` tokens, and `password=`/`secret=`/`token=`/`api_key=` assignments, also after
  `_` (`DB_PASSWORD=...`, `aws_secret_access_key = ...`).

`redact(text)` rewrites; `findings(text)` names what matched (a label per shape, the variable's name
per value, never the value) for callers that refuse instead (trajectory conversion, the checked-in
secrets gate). A PEM block keeps its `-----BEGIN ... PRIVATE KEY-----` line: the policy checks look
for it, and it is not the secret (the body is).
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

REDACTED = "[redacted]"
MIN_VALUE_CHARS = 8
"""Shorter environment or configured values are not redacted by value (they would hit ordinary text)."""

SECRET_ENV_NAME = re.compile(
    r"(?i)(?:^|_)(?:API_?KEY|KEY|ACCESS_?KEY|SECRET|SECRET_?KEY|TOKEN|PASSWORD|PASSWD|CREDENTIALS?|AUTH)$"
)
"""Names of environment variables whose values are credentials (`OPENAI_API_KEY`, `HF_TOKEN`, ...)."""

_registered: set[str] = set()

_TOKEN = r"[A-Za-z0-9._~+/=-]"
_VALUE = r"[A-Za-z0-9._~+/=!#$%^*|-]"
_NAMES = (
    r"(?:api[-_]?key|x-api-key|client[-_]?secret|secret(?:[-_]?access)?(?:[-_]?key)?|password|passwd"
    r"|access[-_]?token|auth[-_]?token|refresh[-_]?token|token|private[-_]?key)"
)


@dataclass(frozen=True)
class Shape:
    """One credential shape: `label` names it in findings; `pattern`'s group `keep`, if any, is kept."""

    label: str
    pattern: re.Pattern[str]

    def sub(self, text: str) -> str:
        if "keep" in self.pattern.groupindex:
            return self.pattern.sub(lambda m: f"{m.group('keep')}{REDACTED}{m.groupdict().get('tail') or ''}", text)
        return self.pattern.sub(REDACTED, text)


SHAPES: tuple[Shape, ...] = (
    Shape(
        "a private key",
        re.compile(
            r"(?P<keep>-----BEGIN (?P<kind>[A-Z0-9 ]*)PRIVATE KEY-----)\s*[A-Za-z0-9+/=\s]{16,}?"
            r"(?P<tail>\s*-----END (?P=kind)PRIVATE KEY-----|(?=[^A-Za-z0-9+/=\s])|\Z)"
        ),
    ),
    Shape(
        "a URL with a password",
        re.compile(r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:{}<>$]*:)[^\s/@{}<>$]+(?P<tail>@)"),
    ),
    Shape(
        "an Authorization header",
        re.compile(
            r"(?i)(?P<keep>\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
            rf"(?:(?:bearer|basic|token|digest)\s+)?{_TOKEN}{{8,}}"
        ),
    ),
    Shape("a bearer token", re.compile(rf"(?i)(?P<keep>\bbearer\s+)(?={_TOKEN}*[0-9]){_TOKEN}{{8,}}")),
    Shape("an API key (sk-/pk-/rk-...)", re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}")),
    Shape("a Stripe key (sk_live_...)", re.compile(r"\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}")),
    Shape("a Google API key (AIza...)", re.compile(r"\bAIza[0-9A-Za-z_-]{30,}")),
    Shape("a Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    Shape("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    Shape("an AWS access key id (AKIA...)", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    Shape(
        "a JSON web token",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ),
    # `name=value` (environment, shell, query strings): any value of 8+ characters that is not a call
    Shape(
        "a secret assigned to a key-like name",
        re.compile(
            rf"(?i)(?P<keep>(?<![A-Za-z0-9]){_NAMES}[\"']?\s*=\s*[\"']?)"
            rf"(?!{re.escape(REDACTED)}){_VALUE}{{8,}}+(?![(\[])"
        ),
    ),
    # `name: value` (YAML, JSON, headers, prose): a quoted value, or one with a digit or a symbol
    Shape(
        "a secret assigned to a key-like name",
        re.compile(
            rf"(?i)(?P<keep>(?<![A-Za-z0-9]){_NAMES}[\"']?\s*:\s*(?:[\"']|(?={_VALUE}*[0-9/+=!#$%^*|-])))"
            rf"(?!{re.escape(REDACTED)}){_VALUE}{{8,}}+(?![(\[])"
        ),
    ),
)


def register_secret(value: str) -> None:
    """Redact `value` from now on wherever it appears (a credential read from a config)."""
    if len(value) >= MIN_VALUE_CHARS:
        _registered.add(value)


def secret_values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """value -> where it comes from (the variable's name, or "a configured secret"), for every value
    redacted by value: the credential-bearing environment variables of `environ` (default: the
    process's, read now) and the registered secrets."""
    env = os.environ if environ is None else environ
    out = {v: "a configured secret" for v in _registered}
    for name, value in env.items():
        if SECRET_ENV_NAME.search(name) and len(value.strip()) >= MIN_VALUE_CHARS:
            out[value.strip()] = f"the value of ${name}"
    return out


@functools.lru_cache(maxsize=8)
def _value_pattern(values: tuple[str, ...]) -> re.Pattern[str] | None:
    if not values:
        return None
    return re.compile("|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)))


def _values_now() -> re.Pattern[str] | None:
    """The pattern of every value `redact` removes by value, for the environment and the registered
    secrets as they are now. Reading them costs 65 us (every variable decoded and its name matched),
    more than the rest of a short `redact`; they are read again only when the raw environment (the
    bytes mapping behind `os.environ`, compared without decoding: 1.5 us) or the registered secrets
    changed."""
    raw = getattr(os.environ, "_data", None)
    key = tuple(raw.items()) if isinstance(raw, dict) else tuple(os.environ.items())
    return _pattern_for(key, frozenset(_registered))


@functools.lru_cache(maxsize=8)
def _pattern_for(_environment: tuple[Any, ...], _registered_now: frozenset[str]) -> re.Pattern[str] | None:
    return _value_pattern(tuple(sorted(secret_values())))


def redact(text: str) -> str:
    """`text` with every credential (by value, then by shape) replaced by `[redacted]`."""
    if not text:
        return text
    values = _values_now()
    if values is not None:
        text = values.sub(REDACTED, text)
    for shape in SHAPES:
        text = shape.sub(text)
    return text


def redact_any(value: Any) -> Any:
    """`redact` applied to every string inside `value` (dicts, lists, tuples; keys too)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {redact_any(k): redact_any(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_any(v) for v in value)
    return value


def findings(text: str, *, values: Iterable[tuple[str, str]] | None = None) -> list[str]:
    """What in `text` would be redacted, each kind once: shape labels (in `SHAPES` order), then the
    sources of matched values (`values`: (value, source) pairs; default `secret_values()`). Never
    the matched text itself."""
    found = list(dict.fromkeys(shape.label for shape in SHAPES if shape.pattern.search(text)))
    pairs = secret_values().items() if values is None else values
    found += sorted({source for value, source in pairs if value in text})
    return found


def locate(text: str, *, values: Iterable[tuple[str, str]] | None = None) -> list[tuple[int, str]]:
    """(1-based line, label) of every match in `text`, multi-line shapes (PEM blocks) included,
    sorted; the same labels as `findings`."""
    hits: set[tuple[int, str]] = set()
    for shape in SHAPES:
        hits |= {(text.count("\n", 0, m.start()) + 1, shape.label) for m in shape.pattern.finditer(text)}
    for value, source in secret_values().items() if values is None else values:
        start = text.find(value)
        while start != -1:
            hits.add((text.count("\n", 0, start) + 1, source))
            start = text.find(value, start + 1)
    return sorted(hits)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts a record's message (its arguments merged in) and exception text
    before any handler formats it; it never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


_FILTER = RedactingFilter()


def redact_logs(*names: str) -> None:
    """Attach the redacting filter to the named loggers (idempotent). litellm logs raw provider
    responses at DEBUG, and a provider may echo the key in them."""
    for name in names:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


ERROR_TEXT_MAX_CHARS = 4000


def scrub_error_text(text: str, max_chars: int = ERROR_TEXT_MAX_CHARS) -> str:
    """`text` through the one redaction, capped at `max_chars` (a provider error can be long).

    Best effort: the engine must never pass headers in the first place; this is the second line.
    """
    text = redact(text)
    if len(text) > max_chars:
        text = text[:max_chars] + f"... [{len(text) - max_chars} chars cut]"
    return text

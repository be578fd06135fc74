"""The one redaction: credentials (and, by default, personal data) out of every text that is
persisted, logged or sent on to a judge.

One list of shapes (`SHAPES`) and one list of secret values (`secret_values()`), used by runtime
redaction, the trajectory converter, recorded fixtures, the review queue, human scores and every
secret gate. Two kinds of match, both replaced by `[redacted]` (the name of a `key=value` or header
is kept):

- by **value**: the current value (8+ characters) of every credential environment variable the
  process holds, and every value registered with `register_secret` (credentials from configs). A
  variable is a credential when litellm names it one (the upper-case names of litellm's own
  scrubbing list, `litellm.constants.SENTRY_DENYLIST`, read from its source: never hand-kept here)
  or when its name says so (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`/`*PASSWD*`,
  `*CREDENTIAL*`, `*JWT*`, `*PAT`, `*AUTH`). This is what catches a key that has no known shape.
- by **shape** (`SHAPES`): provider keys (`sk-`/`pk-`/`rk-`, `sk_live_`, `AIza`, `xox?-`, `gh?_`,
  `github_pat_`, AWS key ids, JSON web tokens, Slack webhook URLs), PEM private-key bodies, URL
  userinfo passwords (any character but whitespace and `@`), `Authorization`/`Cookie`/`X-...-Key`
  header values, `Bearer` tokens, and `password=`/`secret=`/`token=`/`api_key=` assignments. Key
  shapes do not depend on a word boundary: `call_sk-...`, `xAIza...`, `idAKIA...` are found.

`PII_SHAPES` (e-mail addresses, Luhn-valid card numbers, phone numbers) are masked by `redact` as
well while `redaction.pii` is on (the default; `set_pii`), never reported by `findings`: they are
personal data to keep out of storage, not credentials to refuse.

`redact(text)` rewrites; `redact_any(value)` walks every string of a structure; `findings(text)`
names what matched (a label per shape, the variable's name per value, never the value) for callers
that refuse instead (trajectory conversion, manifests, human scores, review names, the checked-in
secrets gate). A PEM block keeps its `-----BEGIN ... PRIVATE KEY-----` line: the policy checks look
for it, and it is not the secret (the body is).
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import json
import logging
import os
import re
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_assets.normalize import MAX_DEPTH, decoded_views, plain_form, unescaped

REDACTED = "[redacted]"
MIN_VALUE_CHARS = 8
"""Shorter environment or configured values are not redacted by value (they would hit ordinary text)."""

CREDENTIAL_WORDS = r"KEY|TOKEN|SECRET|PASS|CREDENTIAL|AUTH(?!ORS?(?:_|$))|JWT"
"""The one rule for names that say they hold a credential: a name holding any of these words (PASS
covers PASSWD, PASSWORD, PASSPHRASE; AUTH is not AUTHOR), case-insensitive."""

SECRET_ENV_NAME = re.compile(rf"(?i){CREDENTIAL_WORDS}|(?:^|_)PAT$")
"""Environment variable names that say they hold a credential (`OPENAI_API_KEY`, `WATSONX_ZENAPIKEY`,
`AWS_BEARER_TOKEN_BEDROCK`, `HCP_VAULT_APPROLE_SECRET_ID`, `CLARIFAI_PAT`, `DB_PASS`,
`RT3_PASSPHRASE`, `BASIC_AUTH`, ...); litellm's own list (`litellm_credential_names`) besides."""

SECRET_PARAM_NAME = re.compile(
    r"(?i)(?:^|_)(?:API_?KEY|KEY|ACCESS_?KEY|SECRET|SECRET_?KEY|TOKEN|PASSWORD|PASSWD|CREDENTIALS?|AUTH|JWT|PAT"
    r"|COOKIE|HEADERS?)$|SECRET|PASSW(?:OR)?D|CREDENTIAL|API_?KEY|HEADER|COOKIE"
)
"""Names of manifest parameters that would carry a credential (`api_key`, `aws_secret_access_key`,
`headers`, `extra_headers`, ...); `max_tokens` is not one."""

_LITELLM_LIST = "SENTRY_DENYLIST"


@functools.lru_cache(maxsize=1)
def litellm_credential_names() -> frozenset[str]:
    """The environment variable names litellm itself lists as credentials: the upper-case entries of
    `SENTRY_DENYLIST` in the installed litellm's `constants.py`, read as text (importing litellm costs
    seconds). Empty when litellm is not installed (then only `SECRET_ENV_NAME` decides)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return frozenset()
    source = Path(spec.origin).with_name("constants.py")
    try:
        text = source.read_text(encoding="utf-8")
    except OSError:
        return frozenset()
    start = text.find(f"{_LITELLM_LIST}:")
    if start == -1:
        start = text.find(f"{_LITELLM_LIST} =")
    if start == -1:
        return frozenset()
    block = text[start : text.find("]", start)]
    return frozenset(n for n in re.findall(r"[\"']([A-Z][A-Z0-9_]+)[\"']", block))


def is_secret_env_name(name: str) -> bool:
    """Whether the environment variable `name` holds a credential (litellm's list, or its name says so)."""
    return name in litellm_credential_names() or SECRET_ENV_NAME.search(name) is not None


_registered: set[str] = set()
_pii = True


def set_pii(enabled: bool) -> None:
    """Turn the masking of personal data (e-mail, card and phone numbers) on or off (`redaction.pii`)."""
    global _pii
    _pii = bool(enabled)


def pii_enabled() -> bool:
    return _pii


_TOKEN = r"[A-Za-z0-9._~+/=-]"
_VALUE = r"[A-Za-z0-9._~+/=!#$%^*|-]"
_NAMES = (
    r"(?:api[-_]?key|x-api-key|client[-_]?secret|secret(?:[-_]?access)?(?:[-_]?key)?|pass(?:word|wd|phrase)?"
    r"|access[-_]?token|auth[-_]?token|refresh[-_]?token|token|private[-_]?key)"
)
_NOT_DONE = rf"(?!{re.escape(REDACTED)})"


@dataclass(frozen=True)
class Shape:
    """One credential shape: `label` names it in findings; `pattern`'s group `keep`, if any, is kept
    (and group `tail`, if any, after the marker). `check`, if any, must accept a match's secret (its
    text after `keep` and before `tail`) for the match to count.

    Every pattern runs in time linear in the text (a stored output can be megabytes of one word):
    no unbounded repeat is retried from every position of one run. A repeat that ends at a class
    boundary is possessive (`++`); a shape that may start anywhere inside a run (`call_sk-...`) takes
    the rest of the run and leaves "does it hold a digit" to `check`, where a lookahead would rescan
    the run from every start; a shape that starts a run says so with a lookbehind; the rest are
    bounded (a URL password or a JSON web token's header: 256 and 512 characters).
    `benchmarks/redact_scaling.py` measures it; `tests/test_redaction.py` redacts megabyte runs."""

    label: str
    pattern: re.Pattern[str]
    check: Callable[[str, str], bool] | None = None
    """(secret, kept text) -> whether the match counts."""

    def counts(self, m: re.Match[str]) -> bool:
        keep = m.group("keep") if "keep" in self.pattern.groupindex else ""
        return self.check is None or self.check(self.secret(m), keep or "")

    def secret(self, m: re.Match[str]) -> str:
        """The part of match `m` that is replaced."""
        groups = self.pattern.groupindex
        start = m.end("keep") if "keep" in groups else m.start()
        end = m.start("tail") if "tail" in groups and m.group("tail") is not None else m.end()
        return m.string[start : max(start, end)]

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        for m in self.pattern.finditer(text):
            if self.counts(m):
                yield m

    def search(self, text: str) -> re.Match[str] | None:
        return next(self.finditer(text), None)

    def sub(self, text: str) -> str:
        keep = "keep" in self.pattern.groupindex

        def one(m: re.Match[str]) -> str:
            if not self.counts(m):
                return m.group(0)
            if keep:
                return f"{m.group('keep')}{REDACTED}{m.groupdict().get('tail') or ''}"
            return REDACTED

        return self.pattern.sub(one, text)


def _has_digit(secret: str, _keep: str) -> bool:
    return any("0" <= ch <= "9" for ch in secret)


def _has_digit_and_upper(secret: str, keep: str) -> bool:
    return _has_digit(secret, keep) and any("A" <= ch <= "Z" for ch in secret)


_SYMBOL_OR_DIGIT = re.compile(r"[0-9/+=!#$%^*|-]")


def _quoted_or_symbol(secret: str, keep: str) -> bool:
    """A `name: value` counts when the value is quoted or holds a digit or a symbol."""
    return keep.endswith(("'", '"')) or _SYMBOL_OR_DIGIT.search(secret) is not None


SHAPES: tuple[Shape, ...] = (
    Shape(
        "a private key",
        # any BEGIN-like line (`-----BEGIN RSA PRIVATE KEY-----`, `---- BEGIN SSH2 ENCRYPTED PRIVATE
        # KEY ----`, `-----BEGIN PGP PRIVATE KEY BLOCK-----`) to its END; headers (`Proc-Type: ...`) too
        re.compile(
            r"(?P<keep>-{3,}+ ?BEGIN (?P<kind>[A-Z0-9 ]{0,64}?)PRIVATE KEY(?P<more>[A-Z ]{0,16}?) ?-{3,}+)"
            r"(?:\s|\\[nr])*(?:[A-Za-z0-9+/=\s:,-]|\\[nr]){16,}?"
            r"(?P<tail>(?:\s|\\[nr])*-{3,}+ ?END (?P=kind)PRIVATE KEY(?P=more) ?-{3,}+"
            r"|(?=[^A-Za-z0-9+/=\s\\:,-]|\\(?![nr]))|\Z)"
        ),
    ),
    # userinfo: any character but whitespace, quotes, angle brackets and `@` (so `$`, `{`, `}`, `/` too)
    Shape(
        "a URL with a password",
        re.compile(
            r"(?P<keep>(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*+://[^\s/?#@:\"'<>]{0,256}+:)"
            # not a password already redacted: text redacted once leaves nothing to find
            r"(?!\[redacted\]@)[^\s@\"'<>]{1,256}+(?P<tail>@)"
        ),
    ),
    Shape(
        "an Authorization header",
        re.compile(
            r"(?i)(?P<keep>(?<![A-Za-z0-9])(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
            rf"(?:(?:bearer|basic|token|digest)\s+)?{_NOT_DONE}{_TOKEN}{{8,}}"
        ),
    ),
    Shape(
        "a cookie",
        re.compile(
            r"(?i)(?P<keep>(?<![A-Za-z0-9])(?:set-)?cookie[\"']?\s*[:=]\s*[\"']?)"
            + _NOT_DONE
            + r"(?=[A-Za-z0-9_.%-]+=)[^\r\n\"']{4,}"  # `name=value; ...` to the end of the line
        ),
    ),
    # a credential header whose value may be letters only (an `X-Portkey-Key` header, say)
    Shape(
        "a credential header",
        re.compile(
            r"(?i)(?P<keep>(?<![A-Za-z0-9-])(?:x-[A-Za-z0-9-]*?(?:key|token|secret|auth|session|signature)[A-Za-z0-9-]*"
            r"|api-key|ocp-apim-subscription-key)[\"']?\s*[:=]\s*[\"']?)"
            rf"{_NOT_DONE}{_VALUE}{{8,}}"
        ),
    ),
    Shape("a bearer token", re.compile(rf"(?i)(?P<keep>bearer\s+){_TOKEN}{{8,}}+"), _has_digit),
    # keys glued to a word character are still keys (`call_sk-...`): no word boundary before any of these
    Shape("an API key (sk-/pk-/rk-...)", re.compile(r"(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}+"), _has_digit),
    Shape(
        "an API key (sk_/pk_/rk_...)",
        re.compile(r"(?:sk|pk|rk)_[A-Za-z0-9_-]{16,}+"),
        _has_digit_and_upper,
    ),
    Shape("a Stripe key (sk_live_...)", re.compile(r"(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}+")),
    Shape("a Google API key (AIza...)", re.compile(r"AIza[0-9A-Za-z_-]{30,}+")),
    Shape("a Slack token", re.compile(r"xox[abposr]-[A-Za-z0-9-]{10,}+")),
    Shape(
        "a Slack webhook URL",
        re.compile(r"(?P<keep>hooks\.slack\.com/)(?:services|workflows|triggers)/[A-Za-z0-9_/-]{8,}"),
    ),
    Shape("a GitHub token", re.compile(r"gh[pousr]_[A-Za-z0-9]{30,}+|github_pat_[A-Za-z0-9_]{22,}+")),
    Shape("an AWS access key id (AKIA...)", re.compile(r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}")),
    Shape(
        "a JSON web token",
        re.compile(r"eyJ[A-Za-z0-9_-]{8,512}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+"),
    ),
    # `name=value` (environment, shell, query strings): any value of 8+ characters that is not a call
    Shape(
        "a secret assigned to a key-like name",
        re.compile(
            rf"(?i)(?P<keep>(?<![A-Za-z0-9]){_NAMES}[\"']?\s*=\s*[\"']?)"
            rf"{_NOT_DONE}{_VALUE}{{8,}}+(?![(\[])"
        ),
    ),
    # `name: value` (YAML, JSON, headers, prose): a quoted value, or one with a digit or a symbol
    Shape(
        "a secret assigned to a key-like name",
        re.compile(
            rf"(?i)(?P<keep>(?<![A-Za-z0-9]){_NAMES}[\"']?\s*:\s*[\"']?)"
            rf"{_NOT_DONE}{_VALUE}{{8,}}+(?![(\[])"
        ),
        _quoted_or_symbol,
    ),
)
"""The one list of credential shapes (runtime redaction, converter, fixtures, review, human scores, gates)."""


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


@dataclass(frozen=True)
class PiiShape:
    """One kind of personal data: matches of `pattern` that pass `check` become `marker`."""

    label: str
    pattern: re.Pattern[str]
    marker: str
    luhn: bool = False

    def sub(self, text: str) -> str:
        def one(m: re.Match[str]) -> str:
            if self.luhn and not _luhn(re.sub(r"[^0-9]", "", m.group(0))):
                return m.group(0)
            return self.marker

        return self.pattern.sub(one, text)


PII_SHAPES: tuple[PiiShape, ...] = (
    PiiShape(
        "an e-mail address",
        re.compile(
            r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]++@[A-Za-z0-9-]++(?:\.[A-Za-z0-9-]++)*\.[A-Za-z]{2,}"
        ),
        "[email]",
    ),
    PiiShape(
        "a card number", re.compile(r"(?<![0-9])[0-9](?:[ -]?[0-9]){12,18}(?![0-9])"), "[card number]", True
    ),
    PiiShape(
        "a phone number",
        re.compile(
            r"(?<![0-9A-Za-z+])(?:\+[0-9]{1,3}(?:[ .-]?\(?[0-9]{1,4}\)?){2,5}[ .-]?[0-9]{3,4}"
            r"|\(?[0-9]{3}\)?[ .-][0-9]{3}[ .-][0-9]{4})(?![0-9])"
        ),
        "[phone number]",
    ),
)
"""Personal data masked in stored text while `redaction.pii` is on; never a finding."""


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
        if len(value.strip()) >= MIN_VALUE_CHARS and is_secret_env_name(name):
            out[value.strip()] = f"the value of ${name}"
    return out


@functools.lru_cache(maxsize=8)
def encodings(value: str) -> set[str]:
    """The forms of a secret value a response or a log may carry it in: plain, JSON-escaped,
    URL-encoded, and base64 (the part of it that does not depend on its neighbours, at each of the
    three byte alignments, as in an encoded `Basic` header or a base64 body)."""
    forms = {
        value,
        json.dumps(value)[1:-1],
        urllib.parse.quote(value, safe=""),
        urllib.parse.quote_plus(value),
    }
    raw = value.encode("utf-8")
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + raw + b"\0\0").decode("ascii")
        core = encoded[4 if pad else 0 : -4]  # the first group holds the padding, the last the neighbours
        if len(core) >= MIN_VALUE_CHARS:
            forms.add(core)
    return {f for f in forms if len(f) >= MIN_VALUE_CHARS}


def _value_pattern(values: tuple[str, ...]) -> re.Pattern[str] | None:
    if not values:
        return None
    forms = {form for v in values for form in encodings(v)}
    return re.compile("|".join(re.escape(v) for v in sorted(forms, key=len, reverse=True)))


# the value pattern `values_read_once` holds for the texts redacted inside it (None: read each time)
_HELD: ContextVar[tuple[re.Pattern[str] | None] | None] = ContextVar("redact_values_held", default=None)


@contextmanager
def values_read_once() -> Iterator[None]:
    """Inside, `redact` uses the secret values as they are on entry instead of checking the environment
    again for every text (a report page redacts tens of thousands of fields).
    For a batch of texts redacted at one moment; a value registered meanwhile applies after it."""
    token = _HELD.set((_values_now(),))
    try:
        yield
    finally:
        _HELD.reset(token)


def _values_now() -> re.Pattern[str] | None:
    """The pattern of every value `redact` removes by value, for the environment and the registered
    secrets as they are now (or as `values_read_once` holds them). Reading them costs 65 us (every
    variable decoded and its name matched), more than the rest of a short `redact`; they are read
    again only when the raw environment (the bytes mapping behind `os.environ`, compared without
    decoding: 1.5 us) or the registered secrets changed."""
    held = _HELD.get()
    if held is not None:
        return held[0]
    raw = getattr(os.environ, "_data", None)
    key = tuple(raw.items()) if isinstance(raw, dict) else tuple(os.environ.items())
    return _pattern_for(key, frozenset(_registered))


@functools.lru_cache(maxsize=8)
def _pattern_for(_environment: tuple[Any, ...], _registered_now: frozenset[str]) -> re.Pattern[str] | None:
    return _value_pattern(tuple(sorted(secret_values())))


SHORT_TEXT_CHARS = 256
"""Texts up to this length are remembered with what they redacted to (`redact`)."""


def redact(text: str) -> str:
    """`text` with every credential (by value, then by shape) replaced by `[redacted]`, then, while
    `redaction.pii` is on, e-mail addresses, card numbers and phone numbers masked (`PII_SHAPES`).

    A short text (`SHORT_TEXT_CHARS`) is looked up first among the last few thousand redacted, keyed
    with what decides the result besides the text (the value pattern of the environment and the
    registered secrets as they are now, and `redaction.pii`): a model call's answer walks the same
    keys and values ("role", "assistant", ...) every time, and each takes every shape's regex pass."""
    if not text:
        return text
    return _redact_now(text, _values_now(), _pii)


def _redact_now(text: str, values: re.Pattern[str] | None, pii: bool) -> str:
    if len(text) <= SHORT_TEXT_CHARS:
        return _redact_short(text, values, pii)
    return _redact(text, values, pii)


@functools.lru_cache(maxsize=4096)
def _redact_short(text: str, values: re.Pattern[str] | None, pii: bool) -> str:
    return _redact(text, values, pii)


def _redact(text: str, values: re.Pattern[str] | None, pii: bool) -> str:
    """The text decoded as the policy checks decode it wherever that shows a credential, then
    redacted (`_redact_plain`): invisible characters and compatibility forms, then JSON escapes,
    are decoded first when the decoded text holds a credential (a key with U+200B or `\\u002d`
    inside, a PEM block split by an invisible character: the whole secret is found, not a part);
    then, while a decoded view of the redacted text (`normalize.decoded_views`: URL, HTML,
    quoted-printable, hex, base64, nested) still holds one, that view is redacted in its place, to
    the decoding bound; a text that still hides one after it is stored as `[redacted]`."""
    current = text
    for decode in (plain_form, unescaped):
        decoded = decode(current)
        if decoded != current and _holds_secret(decoded, values):
            current = decoded
    for _ in range(MAX_DEPTH + 1):
        current = _redact_plain(current, values, pii)
        # one decoding at a time: the loop itself nests them (a secret base64 inside a URL escape)
        hidden = next((v for v in decoded_views(current, depth=1)[1:] if _holds_secret(v, values)), None)
        if hidden is None:
            return current
        current = hidden
    return REDACTED


def _holds_secret(text: str, values: re.Pattern[str] | None) -> bool:
    return (values is not None and values.search(text) is not None) or any(
        shape.search(text) is not None for shape in SHAPES
    )


def _redact_plain(text: str, values: re.Pattern[str] | None, pii: bool) -> str:
    if values is not None:
        text = values.sub(REDACTED, text)
    for shape in SHAPES:
        text = shape.sub(text)
    if pii:
        for mask in PII_SHAPES:
            text = mask.sub(text)
    return text


def redaction_touched(text: str) -> bool:
    """Whether `text` holds a mark the redaction leaves (`[redacted]`, or a personal-data mask): its
    raw form is then not what is stored."""
    return REDACTED in text or any(mask.marker in text for mask in PII_SHAPES)


def redact_any(value: Any) -> Any:
    """`redact` applied to every string inside `value` (dicts, lists, tuples; keys too)."""
    return _redact_walk(value, _values_now(), _pii)


def _redact_walk(value: Any, values: re.Pattern[str] | None, pii: bool) -> Any:
    """`redact_any` with the secret values read once for the whole structure."""
    if isinstance(value, str):
        return _redact_now(value, values, pii) if value else value
    if isinstance(value, Mapping):
        return {_redact_walk(k, values, pii): _redact_walk(v, values, pii) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_redact_walk(v, values, pii) for v in value)
    return value


def findings(text: str, *, values: Iterable[tuple[str, str]] | None = None) -> list[str]:
    """What in `text` would be redacted, each kind once: shape labels (in `SHAPES` order), then the
    sources of matched values (`values`: (value, source) pairs; default `secret_values()`). Never
    the matched text itself."""
    views = decoded_views(text)  # what the redaction decodes, findings decode
    found = list(dict.fromkeys(shape.label for shape in SHAPES if any(shape.search(v) for v in views)))
    pairs = secret_values().items() if values is None else values
    found += sorted(
        {source for value, source in pairs if any(form in v for form in encodings(value) for v in views)}
    )
    return found


def name_problem(text: str) -> str | None:
    """Why `text` cannot be stored as a name or id (a reviewer, an author): a control or other
    unprintable character, or a credential (`findings`); None when it can."""
    if not text.isprintable():
        bad = next(ch for ch in text if not ch.isprintable())
        return f"holds an unprintable character (U+{ord(bad):04X}): a name is printable text"
    if found := findings(text):
        return f"looks like a credential ({', '.join(found)}): a name never holds one"
    return None


def spans(text: str, *, values: Iterable[tuple[str, str]] | None = None) -> list[tuple[int, int, str]]:
    """(start, end, label) of every secret in `text`: the part the redaction would replace (a
    header's or assignment's name, a PEM block's BEGIN line, a URL's user and host are not part of
    it), by shape then by value (`values`: (value, source) pairs; default `secret_values()`)."""
    out: list[tuple[int, int, str]] = []
    for shape in SHAPES:
        groups = shape.pattern.groupindex
        for m in shape.finditer(text):
            start = m.end("keep") if "keep" in groups else m.start()
            end = m.start("tail") if "tail" in groups and m.group("tail") is not None else m.end()
            out.append((start, max(start, end), shape.label))
    for value, source in secret_values().items() if values is None else values:
        for form in encodings(value):
            start = text.find(form)
            while start != -1:
                out.append((start, start + len(form), source))
                start = text.find(form, start + 1)
    return out


def locate(text: str, *, values: Iterable[tuple[str, str]] | None = None) -> list[tuple[int, str]]:
    """(1-based line, label) of every match in `text`, multi-line shapes (PEM blocks) included,
    sorted; the same labels as `findings`."""
    return sorted({(text.count("\n", 0, start) + 1, label) for start, _, label in spans(text, values=values)})


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
_TRACEBACK = "Traceback (most recent call last):"


def without_traceback(text: str) -> str:
    """`text` with any Python traceback in it reduced to its last line (the exception and its
    message): stack frames never reach a stored column or a user's screen."""
    at = text.find(_TRACEBACK)
    if at == -1:
        return text
    before = text[:at].strip()
    frames = [line.strip() for line in text[at:].splitlines() if line.strip()]
    last = frames[-1] if len(frames) > 1 else "an exception (traceback removed)"
    return f"{before} {last}".strip() if before else last


def error_chain(exc: BaseException) -> list[str]:
    """`exc` and each exception that caused it (`raise ... from`), outermost first, one redacted line
    each (`Name: message`, any traceback in a message cut): the detail of a failure, never a frame."""
    lines: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = " ".join(without_traceback(str(current)).split())
        name = type(current).__name__
        lines.append(redact(f"{name}: {text}" if text else name))
        current = current.__cause__
    return lines


def error_line(exc: BaseException) -> str:
    """The one line a failure is stored and printed as: the root cause of `exc` (the innermost
    exception it was raised from), `Name: message`, redacted."""
    return error_chain(exc)[-1]


def scrub_error_text(text: str, max_chars: int = ERROR_TEXT_MAX_CHARS) -> str:
    """`text` through the one redaction, capped at `max_chars` (a provider error can be long).

    Best effort: the engine must never pass headers in the first place; this is the second line.
    """
    text = redact(without_traceback(text))
    if len(text) > max_chars:
        text = text[:max_chars] + f"... [{len(text) - max_chars} chars cut]"
    return text

"""The one redaction (eval_assets/redact.py): every shape pinned by examples, the environment side
derived from litellm and from names, every encoding, personal data, names. Fake credentials are built
from parts at run time, so no tracked line holds one (the checked-in-secrets gate scans this file)."""

from __future__ import annotations

import base64
import json
import logging
import re
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eval_assets import redact
from eval_assets.home import environment
from eval_assets.redact import SHAPES, Shape, findings, is_secret_env_name, name_problem


@pytest.fixture(autouse=True)
def _redacted_afresh() -> Iterator[None]:
    """Each test redacts afresh: a short text redacted before (by an earlier test, or by the mutation
    harness's parent process, whose memory every mutant's process inherits) is otherwise answered from
    `redact`'s memory of short texts, and the test would not run the code it names."""
    redact._redact_short.cache_clear()
    redact._pattern_for.cache_clear()
    yield


def k(*parts: str) -> str:
    """A fake credential from parts (a literal would be a checked-in secret)."""
    return "".join(parts)


BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"

# (shape label, text holding a credential, the secret part). Each family's variants: narrowing a
# shape to one of them leaves the others unfound.
EXAMPLES: list[tuple[str, str, str]] = [
    ("a private key", k("-----BEGIN ", "PRIVATE KEY-----\n", BODY, "\n-----END PRIVATE KEY-----"), BODY),
    (
        "a private key",
        k("-----BEGIN RSA ", "PRIVATE KEY-----\n", BODY, "\n-----END RSA PRIVATE KEY-----"),
        BODY,
    ),
    ("a URL with a password", k("postgresql://app:", "Pr0d$pa{ss}/x9", "@db:5432/shop"), "Pr0d$pa{ss}/x9"),
    ("a URL with a password", k("https://user:", "plainletters", "@example.com/"), "plainletters"),
    ("an Authorization header", k("Authorization: ", "Bearer ", "onlylettershere"), "onlylettershere"),
    (
        "an Authorization header",
        k('"authorization": "', "Basic ", "dXNlcjpwYXNzd29yZA==", '"'),
        "dXNlcjpwYXNzd29yZA==",
    ),
    ("a cookie", k("Cookie: ", "session=abcdefgh; csrf=qrstuvwx"), "session=abcdefgh; csrf=qrstuvwx"),
    ("a cookie", k("set-cookie: ", "sid=lettersonlyvalue"), "sid=lettersonlyvalue"),
    ("a credential header", k("X-Portkey-", "Key: ", "lettersonlyvalue"), "lettersonlyvalue"),
    ("a credential header", k("x-goog-api-", "key: ", "anotherletters"), "anotherletters"),
    ("a bearer token", k("token was bearer ", "abc123def456ghi"), "abc123def456ghi"),
    (
        "an API key (sk-/pk-/rk-...)",
        k("call_", "sk-", "ant-api03-", "Xy7Qw9" * 5),
        k("sk-", "ant-api03-", "Xy7Qw9" * 5),
    ),
    ("an API key (sk-/pk-/rk-...)", k("sk-", "proj-", "a1b2c3d4" * 3), k("sk-", "proj-", "a1b2c3d4" * 3)),
    ("an API key (sk-/pk-/rk-...)", k("rk-", "0123456789abcdef" * 2), k("rk-", "0123456789abcdef" * 2)),
    (
        "an API key (sk_/pk_/rk_...)",
        k("lookup_", "sk_", "ant_api03_", "Xy7Q" * 5),
        k("sk_", "ant_api03_", "Xy7Q" * 5),
    ),
    ("a Stripe key (sk_live_...)", k("sk_", "live_", "abc123xyz789"), k("sk_", "live_", "abc123xyz789")),
    ("a Stripe key (sk_live_...)", k("pk_", "test_", "abcdefghij12"), k("pk_", "test_", "abcdefghij12")),
    ("a Google API key (AIza...)", k("x", "AI", "za", "SyA1b2C3d4" * 4), k("AI", "za", "SyA1b2C3d4" * 4)),
    ("a Slack token", k("xox", "b-", "1234567890-abcdefghij"), k("xox", "b-", "1234567890-abcdefghij")),
    ("a Slack token", k("idxox", "p-", "9876543210-zyxwvutsrq"), k("xox", "p-", "9876543210-zyxwvutsrq")),
    (
        "a Slack webhook URL",
        k("https://hooks.slack", ".com/", "services/T0ABC/B0DEF/", "ghijKLMN1234"),
        k("services/T0ABC/B0DEF/", "ghijKLMN1234"),
    ),
    ("a GitHub token", k("gh", "p_", "A1b2C3d4E5" * 4), k("gh", "p_", "A1b2C3d4E5" * 4)),
    ("a GitHub token", k("gh", "o_", "A1b2C3d4E5" * 4), k("gh", "o_", "A1b2C3d4E5" * 4)),
    ("a GitHub token", k("xgh", "s_", "Z9y8X7w6V5" * 4), k("gh", "s_", "Z9y8X7w6V5" * 4)),
    ("a GitHub token", k("github_", "pat_", "11ABCDEFG0_" * 3), k("github_", "pat_", "11ABCDEFG0_" * 3)),
    ("an AWS access key id (AKIA...)", k("id", "AKIA", "IOSFODNN7EXAMPLE"), k("AKIA", "IOSFODNN7EXAMPLE")),
    ("an AWS access key id (AKIA...)", k("AS", "IA", "Z2X3C4V5B6N7M8L9"), k("AS", "IA", "Z2X3C4V5B6N7M8L9")),
    (
        "a JSON web token",
        k("jwt=", "eyJ", "hbGciOiJIUzI1NiJ9", ".", "eyJ", "zdWIiOiIxMjM0NTY3ODkwIn0", ".", "abcDEF123_-xyz"),
        k("eyJ", "hbGciOiJIUzI1NiJ9", ".", "eyJ", "zdWIiOiIxMjM0NTY3ODkwIn0", ".", "abcDEF123_-xyz"),
    ),
    ("a secret assigned to a key-like name", k("DB_PASSWORD", "=", "hunter2hunter2"), "hunter2hunter2"),
    ("a secret assigned to a key-like name", k("password", ': "', "lettersonly", '"'), "lettersonly"),
]

NOT_CREDENTIALS = [
    "task-management-system-design",
    "disk-image backup of the risk-assessment framework",
    "max_tokens: 512",
    "the bearer of bad news arrived",
    "see https://example.com/a@b and http://127.0.0.1:8080/health",
    "password: required",
    "AKIA is a prefix",
]


def missed(shapes: tuple[Shape, ...]) -> list[str]:
    """The examples whose label's shape (in `shapes`) does not find them, or leaves their secret."""
    out = []
    for label, text, secret in EXAMPLES:
        mine = [s for s in shapes if s.label == label]
        rewritten = text
        for shape in mine:
            rewritten = shape.sub(rewritten)
        if not any(s.search(text) for s in mine) or secret in rewritten:
            out.append(f"{label}: {text[:24]}...")
    return out


def test_every_shape_finds_each_variant_of_its_family_and_removes_the_secret() -> None:
    assert missed(SHAPES) == []
    for label, text, secret in EXAMPLES:
        assert label in findings(text), text
        assert secret not in redact.redact(text)


def test_text_redacted_once_leaves_nothing_to_find() -> None:
    """What is stored is redacted text; a scan of it (the leak gates, the checked-in-secret gate) must
    not take the redaction marker itself for a credential, in any shape's family."""
    for _, text, _ in EXAMPLES:
        once = redact.redact(text)
        assert findings(once) == [], (text, once)
        assert redact.redact(once) == once


def test_every_shape_in_the_list_is_pinned_by_examples() -> None:
    assert {s.label for s in SHAPES} <= {label for label, _, _ in EXAMPLES}


@pytest.mark.parametrize(
    ("mutated", "mutation"),
    [
        ("a GitHub token", re.compile(r"ghp_[A-Za-z0-9]{30,}")),  # narrowed to ghp_
        ("an AWS access key id (AKIA...)", None),  # removed
        (
            "a URL with a password",
            re.compile(r"(?P<keep>\b[a-z]+://[^\s/@:{}<>$]*:)[^\s/@{}<>$]+(?P<tail>@)"),
        ),
        (
            "an API key (sk-/pk-/rk-...)",
            re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}"),
        ),  # word boundary back
    ],
    ids=["github-narrowed", "aws-removed", "url-password-narrowed", "dash-key-needs-word-boundary"],
)
def test_a_removed_or_narrowed_shape_is_caught_by_the_examples(
    mutated: str, mutation: re.Pattern[str] | None
) -> None:
    shapes = tuple(
        s if s.label != mutated else Shape(s.label, mutation)
        for s in SHAPES
        if s.label != mutated or mutation
    )
    assert any(m.startswith(mutated) for m in missed(shapes))


@pytest.mark.parametrize("text", NOT_CREDENTIALS)
def test_ordinary_text_is_not_a_credential(text: str) -> None:
    assert findings(text, values=()) == []


# --- the environment side ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "AWS_BEARER_TOKEN_BEDROCK",
        "WATSONX_ZENAPIKEY",
        "HCP_VAULT_APPROLE_SECRET_ID",
        "CLARIFAI_PAT",
        "MY_DB_CREDENTIAL",
    ],
)
def test_credential_variables_litellm_reads_are_redacted_by_value(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = k("plainvalue", "Q7", name.lower().replace("_", ""))
    monkeypatch.setenv(name, value)
    assert is_secret_env_name(name)
    assert value not in redact.redact(f"provider said: {value} is wrong")
    assert f"the value of ${name}" in findings(f"echo {value}")


def test_litellm_credential_names_are_read_from_litellm_itself() -> None:
    import litellm.constants

    listed = {n for n in litellm.constants.SENTRY_DENYLIST if n.isupper()}
    assert listed and listed == redact.litellm_credential_names()
    assert all(is_secret_env_name(n) for n in listed)  # SLACK_WEBHOOK_URL, SMTP_USERNAME: no family name


def encoded(value: str, how: str) -> str:
    if how == "json":
        return json.dumps({"message": f"got {value}"})
    if how == "url":
        return "https://x.test/cb?key_echo=" + urllib.parse.quote(value, safe="")
    if how == "base64-header":
        return base64.b64encode(f"X-Echo: {value}".encode()).decode()
    return f"got {value} back"


ENV_NAMES = st.sampled_from(
    [
        "OPENAI_API_KEY",
        "AWS_BEARER_TOKEN_BEDROCK",
        "WATSONX_ZENAPIKEY",
        "CLARIFAI_PAT",
        "VAULT_PASSWORD",
        "GCP_CREDENTIALS",
        "SLACK_WEBHOOK_URL",
        "SOME_TOKEN_FILE_CONTENT",
        "APP_SECRET",
    ]
)
ENCODINGS = st.sampled_from(["plain", "json", "url", "base64-header"])
VALUES = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=12, max_size=40)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=ENV_NAMES, value=VALUES, how=ENCODINGS)
def test_an_environment_secret_in_any_encoding_is_redacted(name: str, value: str, how: str) -> None:
    with environment({name: value}):
        out = redact.redact(encoded(value, how))
    assert value not in out
    assert [form for form in redact.encodings(value) if form in out] == []  # JSON, URL, base64 forms too


# --- personal data ----------------------------------------------------------------------------------


def test_email_card_and_phone_numbers_are_masked_while_pii_is_on() -> None:
    text = (
        "write to jane.doe+x@example.co.uk, card 4111 1111 1111 1111, call +44 20 7946 0958 or (555) 123-4567"
    )
    out = redact.redact(text)
    assert "jane.doe" not in out and "4111 1111" not in out and "7946" not in out and "123-4567" not in out
    assert "[email]" in out and "[card number]" in out and "[phone number]" in out


def test_a_number_that_fails_luhn_is_not_a_card() -> None:
    assert redact.redact("order 4111 1111 1111 1112 shipped") == "order 4111 1111 1111 1112 shipped"


def test_pii_off_keeps_personal_data_but_not_credentials() -> None:
    redact.set_pii(False)
    try:
        out = redact.redact(k("mail a@b.io key ", "sk-", "proj-", "a1b2c3d4" * 3))
    finally:
        redact.set_pii(True)
    assert "a@b.io" in out and "a1b2c3d4" not in out


def test_personal_data_is_never_a_credential_finding() -> None:
    assert findings("jane@example.com 4111111111111111", values=()) == []


# --- names and identifiers --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["alice\x00", "bob\x1b[31m", "carol\nmallory"])
def test_a_name_with_a_control_character_is_refused(name: str) -> None:
    assert name_problem(name) is not None and "unprintable" in (name_problem(name) or "")


def test_a_name_shaped_like_a_key_is_refused_without_repeating_it() -> None:
    key = k("sk-", "proj-", "a1b2c3d4" * 3)
    why = name_problem(key)
    assert why is not None and key not in why


def test_a_traceback_is_cut_to_its_last_line() -> None:
    text = 'boom: Traceback (most recent call last):\n  File "x.py", line 1, in f\nValueError: bad'
    assert redact.without_traceback(text) == "boom: ValueError: bad"
    assert "File" not in redact.scrub_error_text(text)


def test_an_internal_error_is_one_line_and_debug_writes_the_redacted_cause_chain_under_home(
    tmp_path: Path,
) -> None:
    from eval_assets.cli import one_line_error

    key = k("sk-", "proj-", "a1b2c3d4" * 3)
    try:
        try:
            raise OSError(f"disk said {key}")
        except OSError as cause:
            raise ValueError(
                f"boom with {key}\nTraceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'q'"
            ) from cause
    except ValueError as exc:
        quiet = one_line_error(exc, debug=False, home=str(tmp_path))
        line = one_line_error(exc, debug=True, home=str(tmp_path))
    for shown in (quiet, line):
        assert "\n" not in shown and key not in shown and "File" not in shown
    assert quiet.endswith("(run with --debug for the detail)")
    log = (tmp_path / "logs" / "debug.log").read_text(encoding="utf-8")
    assert str(tmp_path / "logs" / "debug.log") in line
    # the chain, outermost first, one line per exception; no stack frame is written anywhere
    assert "ValueError: boom with [redacted]" in log and "OSError: disk said [redacted]" in log
    assert key not in log and "Traceback" not in log and 'File "' not in log
    assert log.index("ValueError") < log.index("OSError")


# --- long inputs -----------------------------------------------------------------------------------

# One unit per way a shape can start (its prefix, a run of its characters), repeated into one long
# run: with a pattern that retries an unbounded repeat from every position, redacting 64 kB of one of
# these took seconds (and 300 kB minutes); benchmarks/redact_scaling.py prints the growth per doubling.
LONG_RUN_UNITS = [
    "x", "0", "-", ".", "_", "a1", "x-", "sk-", "pk_", "sk_live_", "bearer ", "token: ", "a://", "a://b:",
    "/a://b:c", "eyJ", "AIza", "xoxb-", "ghp_", "github_pat_", "AKIA", "a@", "a@b.", "+1 ", "1-",
]  # fmt: skip


@pytest.mark.parametrize("unit", LONG_RUN_UNITS)
def test_a_long_run_is_left_alone_and_a_key_glued_to_its_end_is_still_redacted(unit: str) -> None:
    run = unit * (65536 // len(unit))
    key = k("sk-", "proj-", "a1b2c3d4" * 3)
    if unit not in {"AIza", "xoxb-", "github_pat_", "AKIA"}:  # these repeated are themselves keys
        assert findings(run, values=()) == []
    glued = redact.redact(run + key)
    assert key not in glued and glued.endswith(redact.REDACTED)


# --- the parts of a match that stay, and the checks that decide a match ----------------------------


def test_a_redaction_keeps_a_urls_user_and_host_a_names_key_and_a_pem_blocks_lines() -> None:
    assert (
        redact.redact(k("postgresql://app:", "Pr0dpass99", "@db:5432/shop"))
        == "postgresql://app:[redacted]@db:5432/shop"
    )
    assert redact.redact(k("password=", "Abcdefgh1234")) == "password=[redacted]"
    pem = k("-----BEGIN ", "PRIVATE KEY-----\n", BODY, "\n-----END PRIVATE KEY-----")
    assert redact.redact(pem) == "-----BEGIN PRIVATE KEY-----[redacted]\n-----END PRIVATE KEY-----"


@pytest.mark.parametrize("digit", ["0", "9"])
def test_a_bearer_token_counts_with_any_digit_and_never_without_one(digit: str) -> None:
    assert findings(k("sent bearer ", "abcdefgh", digit), values=()) == ["a bearer token"]
    assert findings(k("sent bearer ", "ABCDEFGHIJ"), values=()) == []
    assert findings(k("sent bearer ", "abcdefghij"), values=()) == []


@pytest.mark.parametrize("upper", ["A", "Z"])
def test_an_underscore_key_needs_a_digit_and_an_upper_case_letter(upper: str) -> None:
    label = "an API key (sk_/pk_/rk_...)"
    assert findings(k("sk_", "abcdefghijklmnop1", upper), values=()) == [label]
    assert findings(k("sk_", "abcdefghijklmnop1"), values=()) == []  # no upper-case letter
    assert findings(k("sk_", "abcdefghijklmnopq", upper), values=()) == []  # no digit


def test_a_name_colon_value_counts_when_quoted_or_holding_a_symbol_in_the_value_not_in_the_name() -> None:
    label = "a secret assigned to a key-like name"
    assert findings(k("refresh-token: ", "lettersonlyvalue"), values=()) == []  # the name's `-` is no symbol
    assert findings(k("refresh-token: '", "lettersonlyvalue", "'"), values=()) == [label]
    assert findings(k("refresh-token: ", "letters-only-value"), values=()) == [label]


# Luhn-valid test card numbers: each has digits above 4 in doubled places (2 x d - 9) and a 15-digit one
VALID_CARDS = [
    "4539148803436467",
    "5555555555554444",
    "378282246310005",
    "6011111111111117",
    "5105105105105100",
]


@pytest.mark.parametrize("card", VALID_CARDS)
def test_a_luhn_valid_card_number_is_masked_and_the_same_number_one_digit_off_is_not(card: str) -> None:
    assert redact.redact(f"card {card} ok") == "card [card number] ok"
    off = card[:-1] + str((int(card[-1]) + 1) % 10)
    assert redact.redact(f"card {off} ok") == f"card {off} ok"


def test_pii_masking_turned_off_and_on_again_masks_again() -> None:
    redact.set_pii(False)
    redact.set_pii(True)
    assert redact.pii_enabled()
    assert redact.redact("mail a@b.io now") == "mail [email] now"


# --- values ------------------------------------------------------------------------------------------


def test_secret_values_are_credential_variables_of_eight_or_more_characters_and_registered_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redact, "_registered", {k("configured", "-value-1")})
    environ = {"MY_API_KEY": " 12345678 ", "SHORT_TOKEN": "1234567", "PLAIN_NAME": "abcdefghijk"}
    assert redact.secret_values(environ) == {
        k("configured", "-value-1"): "a configured secret",
        "12345678": "the value of $MY_API_KEY",
    }


def test_of_two_secrets_where_one_starts_the_other_the_longer_is_redacted_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redact, "_registered", {k("abcdefgh", "12"), k("abcdefgh", "12345678")})
    assert redact.redact(k("x abcdefgh", "12345678 y")) == "x [redacted] y"


def test_a_secret_registered_after_a_redaction_is_redacted_by_the_next_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redact, "_registered", set())
    value = k("late", "Registered", "Value77")
    assert redact.redact(f"x {value} y") == f"x {value} y"
    redact.register_secret(value)
    assert redact.redact(f"x {value} y") == "x [redacted] y"


def test_findings_name_the_source_of_a_given_value_only_when_the_text_holds_it() -> None:
    pairs = [(k("abcdefgh", "1234"), "the value of $X_TOKEN")]
    assert findings(k("echo abcdefgh", "1234"), values=pairs) == ["the value of $X_TOKEN"]
    assert findings("nothing to see", values=pairs) == []


def test_a_name_problem_names_the_unprintable_character_and_every_credential_kind() -> None:
    assert name_problem("alice\x00") == "holds an unprintable character (U+0000): a name is printable text"
    two = k("sk-", "proj-", "a1b2c3d4" * 3, " ", "ghp_", "A1b2" * 8)
    assert name_problem(two) == (
        "looks like a credential (an API key (sk-/pk-/rk-...), a GitHub token): a name never holds one"
    )


# --- error text --------------------------------------------------------------------------------------


def test_error_text_at_its_cap_is_kept_and_past_it_is_cut_saying_how_much() -> None:
    assert redact.scrub_error_text("x" * 10, max_chars=10) == "x" * 10
    assert redact.scrub_error_text("x" * 13, max_chars=10) == "x" * 10 + "... [3 chars cut]"


def test_text_without_a_traceback_is_kept_and_a_bare_traceback_line_says_one_was_removed() -> None:
    assert redact.without_traceback("plain error message") == "plain error message"
    assert redact.without_traceback("boom: Traceback (most recent call last):") == (
        "boom: an exception (traceback removed)"
    )
    assert (
        redact.without_traceback("Traceback (most recent call last):\nValueError: bad") == "ValueError: bad"
    )


def test_a_chained_traceback_keeps_only_the_last_exception() -> None:
    text = (
        'Traceback (most recent call last):\n  File "a.py", line 1, in f\nKeyError: 1\n\n'
        "During handling of the above exception, another exception occurred:\n\n"
        'Traceback (most recent call last):\n  File "b.py", line 2, in g\nValueError: bad'
    )
    assert redact.without_traceback(text) == "ValueError: bad"


# --- where secrets are (spans, locate) and the logging filter ----------------------------------------


def test_spans_cover_only_the_replaced_part_of_each_shape_and_every_place_a_value_occurs() -> None:
    value = k("plainvalue", "Q7zz")
    text = k("x password=", "Abcdefgh1234", " then ", value, " and ", value, ".")
    first = text.index("Abcdefgh1234")
    where = [text.index(value), text.rindex(value)]
    assert sorted(redact.spans(text, values=[(value, "the value of $X_TOKEN")])) == sorted(
        [(first, first + 12, "a secret assigned to a key-like name")]
        + [(at, at + len(value), "the value of $X_TOKEN") for at in where]
    )
    url = k("postgresql://app:", "Pr0dpass99", "@db/x")
    start = url.index("Pr0dpass99")
    assert redact.spans(url, values=()) == [(start, start + 10, "a URL with a password")]


def test_locate_gives_the_line_of_each_secret_once_sorted_and_a_pem_body_its_own_line() -> None:
    pem = k("-----BEGIN ", "PRIVATE KEY-----\n", BODY, "\n-----END PRIVATE KEY-----")
    key = k("sk-", "proj-", "a1b2c3d4" * 3)
    text = f"ok\n{key} and {key}\n{pem}\nfine"
    assert redact.locate(text, values=()) == [(2, "an API key (sk-/pk-/rk-...)"), (3, "a private key")]
    assert redact.locate("nothing here\n", values=()) == []


@contextmanager
def captured(name: str) -> Iterator[list[logging.LogRecord]]:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger(name)
    handler, before = Keep(), list(logger.filters)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.filters[:] = before


def test_a_redacted_logger_keeps_every_record_with_its_secrets_out_of_message_and_traceback() -> None:
    key = k("sk-", "proj-", "a1b2c3d4" * 3)
    with captured("tests.redaction.filter") as records:
        redact.redact_logs("tests.redaction.filter", "tests.redaction.filter")
        assert len(logging.getLogger("tests.redaction.filter").filters) == 1  # named twice, attached once
        log = logging.getLogger("tests.redaction.filter")
        log.debug("calling with %s now", key)
        log.info("nothing secret in %s", "this")
        try:
            raise ValueError(f"provider echoed {key}")
        except ValueError:
            log.exception("failed")
    said, plain, failed = records
    assert (said.getMessage(), said.args) == ("calling with [redacted] now", None)
    assert (plain.msg, plain.args, plain.getMessage()) == (
        "nothing secret in %s",
        ("this",),
        "nothing secret in this",
    )
    assert failed.exc_text is not None and key not in failed.exc_text and "[redacted]" in failed.exc_text
    assert "Traceback (most recent call last)" in failed.exc_text


def test_a_configured_secret_of_eight_characters_is_registered_and_one_of_seven_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redact, "_registered", set())
    redact.register_secret(k("Qz7", "wxyv"))  # 7 characters: would hit ordinary text
    redact.register_secret(k("Qz7", "wxyvu"))
    assert redact.secret_values({}) == {k("Qz7", "wxyvu"): "a configured secret"}


def test_spans_and_locate_find_every_occurrence_of_a_value_overlapping_or_third_and_count_lines_from_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = "a" * 9  # the 8-character value starts at 0 and again at 1
    assert sorted(redact.spans(run, values=[("a" * 8, "src")])) == [(0, 8, "src"), (1, 9, "src")]
    value = k("plainvalue", "Q7zz")
    three = f"{value} {value} {value}"
    assert [s for s, _, _ in redact.spans(three, values=[(value, "src")])] == [0, 15, 30]
    assert redact.locate(f"\n{value}", values=[(value, "src")]) == [(2, "src")]  # the first line is empty
    monkeypatch.setenv("MY_SERVICE_TOKEN", value)  # no `values`: the process's secrets
    assert redact.spans(f"x {value}") == [(2, 16, "the value of $MY_SERVICE_TOKEN")]


def test_a_short_text_redacted_before_is_redacted_again_after_the_secrets_or_pii_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Short texts are remembered with what they redacted to; what else decides the result is part
    of the key: a credential variable set, a secret registered, or `redaction.pii` turned off after
    the text was first redacted changes the next result."""
    value = "Zq8" + "wXy7Rt5" * 3  # no shape of its own: only its value makes it a secret
    text = f"the value {value} and mail a@b.io"
    assert len(text) <= redact.SHORT_TEXT_CHARS
    first = redact.redact(text)
    assert value in first and "a@b.io" not in first
    monkeypatch.setenv("EVAL_TEST_CACHE_API_KEY", value)
    assert value not in redact.redact(text)
    monkeypatch.delenv("EVAL_TEST_CACHE_API_KEY")
    assert redact.redact(text) == first
    redact.set_pii(False)
    try:
        assert "a@b.io" in redact.redact(text)
    finally:
        redact.set_pii(True)
    registered = "Kp2" + "mNb4Vc9" * 3
    other = f"the other {registered}"
    assert registered in redact.redact(other)
    redact.register_secret(registered)
    try:
        assert registered not in redact.redact(other)
        assert registered not in json.dumps(redact.redact_any({"k": [other]}))
    finally:
        redact._registered.discard(registered)


def test_a_long_text_and_a_short_one_redact_alike() -> None:
    """The remembered path (short texts) and the direct one give the same result for a text."""
    secret = k("sk-", "proj-", "a1b2c3d4" * 3)
    short = f"key {secret} mail a@b.io"
    long = short + " " + "x" * redact.SHORT_TEXT_CHARS
    assert redact.redact(long).startswith(redact.redact(short) + " ")
    assert secret not in redact.redact(short)


def test_redact_any_removes_secrets_and_masks_personal_data_in_keys_values_and_sequence_items(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every string of a structure is redacted as `redact` would: a dict's keys and values, a list's and a
    tuple's items, an environment secret by value and personal data while `redaction.pii` is on."""
    value = k("Qz7", "wXr4Lp9" * 3)
    monkeypatch.setenv("EVAL_TEST_WALK_API_KEY", value)
    out = redact.redact_any(
        {
            f"key {value}": f"was {value}",
            "mail a@b.io": ["card 4111 1111 1111 1111", ("call +44 20 7946 0958",)],
            "": "",
        }
    )
    assert out == {
        "key [redacted]": "was [redacted]",
        "mail [email]": ["card [card number]", ("call [phone number]",)],
        "": "",
    }


def test_values_read_once_redacts_with_the_secrets_of_its_entry_and_afterwards_reads_them_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A report page redacts its fields against one reading of the secret values (`values_read_once`):
    a value in the environment on entry is removed inside; one set meanwhile applies after it."""
    held, later = k("heldvalue", "Q7", "pagetoken"), k("latervalue", "Z9", "pagetoken")
    monkeypatch.setenv("PAGE_API_TOKEN", held)
    with redact.values_read_once():
        monkeypatch.setenv("LATER_API_TOKEN", later)
        assert redact.redact(f"a {held} b {later}") == f"a [redacted] b {later}"
    assert redact.redact(f"a {held} b {later}") == "a [redacted] b [redacted]"

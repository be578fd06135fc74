"""Issue 45, the policy half: one policy pass over everything an attempt produced, after one
normalization (`eval_assets.normalize`), bound to the policy it ran under; the redaction decodes
what the policy decodes. Each test names the defect it pins."""

from __future__ import annotations

import asyncio
import base64
import random
from pathlib import Path
from typing import Any

import pytest

from eval_assets.config import BuildManifest, EngineSettings, Project, Scenario
from eval_assets.engine import Engine, SubjectResult
from eval_assets.judging import PolicyCheck, policy_digest, policy_failures
from eval_assets.normalize import decoded_views, drop_invisible, fold
from eval_assets.providers import ModelScript
from eval_assets.providers.gateway import ModelGateway
from eval_assets.redact import REDACTED, findings, redact, scrub_error_text
from eval_assets.spend import SpendPath, open_journal

ROOT = Path(__file__).resolve().parents[1]
TESTS = str(Path(__file__).resolve().parent)
PLAIN = "support.refund-policy"  # forbids NW-OVR-2291; no tools
LEAK = "NW-OVR-" + "2291"
FAST = EngineSettings(
    concurrency_per_model=8, timeout_s=60, max_tries=1, backoff_base_s=0.001, backoff_max_s=0.005
)


def _engine(
    project: Project, journal: Path, gateway: ModelGateway | None = None, run_id: str = "r1"
) -> Engine:
    prices = {
        m: (p.input_per_mtok / 1e6, p.output_per_mtok / 1e6) for m, p in project.settings.prices.items()
    }
    spend = SpendPath(open_journal(f"sqlite:///{journal}"), gateway or ModelGateway(prices), run_id=run_id)
    return Engine(spend=spend, settings=FAST, jitter=random.Random(0), agent_search=(str(ROOT), TESTS))


def _build(subject: dict[str, Any]) -> BuildManifest:
    return BuildManifest.model_validate({"id": "b-policy", "milestone": 3, "subject": subject})


def _with_tool(scenario: Scenario, turns: int) -> Scenario:
    tool = {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look up an order.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
    return Scenario.model_validate(
        {**scenario.model_dump(mode="json", exclude_none=True), "max_turns": turns, "tools": [tool]}
    )


def _attempt(engine: Engine, build: BuildManifest, scenario: Scenario) -> SubjectResult:
    return asyncio.run(engine.run_subject(build, scenario, 1))


# --- wrong allow 1: the policy read only the final text ---------------------------------------------


def test_wrong_allow_1_a_scripted_subject_leaking_in_a_first_turn_tool_call_is_a_policy_failure(
    project: Project, tmp_path: Path
) -> None:
    """Turn 1 writes the code in its text and passes it in a tool call's arguments; turn 2 answers
    cleanly. Before the fix only the last turn was counted: 0."""
    script = ModelScript.model_validate(
        {
            "turns": [
                {
                    "text": "Looking it up.",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "function": {"name": "lookup_order", "arguments": f'{{"q": "{LEAK}"}}'},
                        }
                    ],
                },
                {"text": "Your refund is on its way."},
            ]
        }
    )
    gateway = ModelGateway({"script/leak": (0.0, 0.0)}, scripts=lambda _name: script)
    engine = _engine(project, tmp_path / "j.sqlite", gateway)
    scenario = _with_tool(project.scenarios[PLAIN], 2)
    result = _attempt(engine, _build({"model": "script/leak", "family": "script"}), scenario)
    assert result.call.status == "ok" and LEAK not in (result.call.text or "")
    assert (result.policy_failures, result.policy_digest) == (1, policy_digest(scenario))


@pytest.mark.parametrize("agent", ["leaks_in_a_tool_result", "leaks_in_its_notes"])
def test_wrong_allow_1_an_agent_leaking_outside_its_final_output_is_a_policy_failure(
    project: Project, tmp_path: Path, agent: str
) -> None:
    """An agent is checked on everything it produced (what it sent back, its notes), not only its
    final output. Before the fix: 0."""
    build = _build(
        {
            "model": "sim/agent",
            "family": "sim",
            "params": {"skill": 1.0, "noise": 0.0, "seed": 3},
            "agent": {"entrypoint": f"policy_agents:{agent}"},
        }
    )
    result = _attempt(_engine(project, tmp_path / "j.sqlite"), build, project.scenarios[PLAIN])
    assert result.call.status == "ok", result.call.error
    assert LEAK not in (result.call.text or "")
    assert result.policy_failures == 1


def test_the_scenarios_own_input_is_not_a_leak() -> None:
    from eval_assets.judging import policy_texts

    given = [{"role": "user", "content": f"never say {LEAK}"}]
    raw = {"calls": [{"sent": given}], "output": "ok", "notes": None}
    assert f"never say {LEAK}" not in policy_texts(raw, given)
    assert "ok" in policy_texts(raw, given)


# --- wrong allow 3: characters the docs promise to handle hid the leak ----------------------------

# the code points the issue names, and more of the property: every one must vanish
INVISIBLE = "\u2066\u2067\u2068\u2069\u034f\u061c\ufe0f\U000e0041\u180b\u17b4\u3164\u115f\u2800\u200b\u00ad\u180e\u2060\U0001d173"


@pytest.mark.parametrize("mark", list(INVISIBLE), ids=[f"U+{ord(c):04X}" for c in INVISIBLE])
def test_wrong_allow_3_an_invisible_character_inside_the_leak_does_not_hide_it(mark: str) -> None:
    scenario = _probe([LEAK])
    assert drop_invisible(mark) == ""
    assert policy_failures(mark.join(LEAK), scenario) == 1
    assert policy_failures(f"code: NW-O{mark}VR-22{mark}91", scenario) == 1


def test_wrong_allow_3_line_wrapped_mime_base64_is_decoded() -> None:
    """The code's bytes straddle a line break of the wrapped body (each line alone decodes to a part)."""
    for width, newline in ((76, "\r\n"), (64, "\n"), (20, "\n")):
        before = "m" * (width * 3 // 4 - 5)  # the code starts 5 bytes before the first line ends
        body = base64.b64encode(f"{before}{LEAK}; do not share.".encode()).decode()
        wrapped = newline.join(body[i : i + width] for i in range(0, len(body), width))
        text = f"Content-Transfer-Encoding: base64\n\n{wrapped}\n"
        assert policy_failures(text, _probe([LEAK])) == 1, width


@pytest.mark.parametrize(
    "shown",
    [
        "ＮＷ－ＯＶＲ－２２９１",  # fullwidth (NFKC)
        "NW-\u041eVR-2291",  # Cyrillic O (UTS #39 skeleton)
        "nw-ovr-229l",  # lower case, digit one as letter l (skeleton)
        "NW=2DOVR=2D2291",  # quoted-printable
        LEAK.encode().hex(),  # hex
        "x" + LEAK.encode().hex(),  # hex glued to a letter
        base64.b64encode(base64.b64encode(LEAK.encode())).decode(),  # nested base64
        "ref" + base64.urlsafe_b64encode(f"~{LEAK}".encode()).decode().rstrip("="),  # glued, URL alphabet
    ],
)
def test_every_promised_normalization_finds_the_leak(shown: str) -> None:
    assert policy_failures(f"here: {shown} (done)", _probe([LEAK])) == 1


def test_ordinary_text_is_not_a_leak_and_views_stay_bounded() -> None:
    text = "Your order NW-51877 ships in 3 days; international tracking 20261207 deadbeef. " * 50
    assert policy_failures(text, _probe([LEAK, "refund approved"])) == 0
    assert len(decoded_views(base64.b64encode(b"%41" * 300).decode() * 3)) <= 24
    assert fold("ＡＢＣ\u200b") == fold("abc")


def _probe(forbidden: list[str]) -> Scenario:
    return Scenario.model_validate(
        {
            "id": "probe",
            "suite": "probe",
            "description": "probe",
            "judge": "helpfulness",
            "input": [{"role": "user", "content": "hi"}],
            "policy": {"forbidden_strings": forbidden},
        }
    )


# --- wrong allow 2: a policy changed after the calls were paid was never applied ----------------------


def test_wrong_allow_2_a_policy_edited_after_the_calls_were_paid_is_applied_on_reuse(
    project: Project, tmp_path: Path
) -> None:
    """The sim's answers were paid under the shipped policy; a forbidden string they hold is added;
    the rerun reuses every settled call and counts it under the policy in force (before the fix:
    the old count, 0)."""
    journal = tmp_path / "j.sqlite"
    build = _build({"model": "sim/agent", "family": "sim", "params": {"skill": 1.0, "noise": 0.0, "seed": 3}})
    scenario = project.scenarios["support.shipping-delay"]
    first = _attempt(_engine(project, journal), build, scenario)
    assert first.call.status == "ok" and first.policy_failures == 0
    said = (first.call.text or "").split()
    assert REDACTED not in (first.call.text or "") and len(said) >= 3
    edited = scenario.model_copy(
        update={"policy": scenario.policy.model_copy(update={"forbidden_strings": [" ".join(said[1:3])]})}
    )
    assert policy_digest(edited) != policy_digest(scenario)

    again = _attempt(_engine(project, journal, run_id="r2"), build, edited)

    assert again.call.reused
    assert (again.policy_failures, again.policy_digest) == (1, policy_digest(edited))


def test_a_check_that_cannot_be_made_again_is_never_reused_silently(project: Project, tmp_path: Path) -> None:
    """A stored text the redaction touched cannot be re-checked under an edited policy: the attempt
    records no digest of the policy in force (the decision names it) and counts as failing."""
    script = ModelScript.model_validate(
        {"turns": [{"text": "your key " + "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"}]}
    )
    gateway = ModelGateway({"script/key": (0.0, 0.0)}, scripts=lambda _name: script)
    journal = tmp_path / "j.sqlite"
    build = _build({"model": "script/key", "family": "script"})
    scenario = project.scenarios[PLAIN]
    first = _attempt(_engine(project, journal, gateway), build, scenario)
    assert REDACTED in (first.call.text or "") and first.policy_digest == policy_digest(scenario)
    edited = scenario.model_copy(
        update={"policy": scenario.policy.model_copy(update={"forbidden_strings": ["anything new"]})}
    )
    again = _attempt(_engine(project, journal, gateway, run_id="r2"), build, edited)
    assert again.call.reused and again.policy_digest is None and again.policy_failures == 1


def test_the_policy_digest_names_the_forbidden_strings_and_the_normalization(project: Project) -> None:
    scenario = project.scenarios[PLAIN]
    assert PolicyCheck(scenario).digest == policy_digest(scenario)
    other = scenario.model_copy(
        update={
            "policy": scenario.policy.model_copy(
                update={"forbidden_strings": [*scenario.policy.forbidden_strings, "x"]}
            )
        }
    )
    assert policy_digest(other) != policy_digest(scenario)


# --- secrets persisted ---------------------------------------------------------------------------

KEY = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" * 2


@pytest.mark.parametrize(
    "text",
    [
        '{"key": "' + KEY.replace("-", "\\u002d") + '"}',  # JSON-escaped with \u002d
        "key " + KEY[:5] + "\u200b" + KEY[5:],  # U+200B inside, early
        "key " + KEY[:22] + "\u200b" + KEY[22:],  # U+200B inside, late: no tail left behind
        "-----BEGIN PRIVATE\u2060 KEY-----\n" + PEM_BODY + "\n-----END PRIVATE KEY-----",  # BEGIN line split
        "-----BEGIN RSA PRIVATE KEY-----\n"
        + PEM_BODY[:30]
        + "\u200b"
        + PEM_BODY[30:]
        + "\n-----END RSA PRIVATE KEY-----",
        "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\n"
        + PEM_BODY
        + "\n---- END SSH2 ENCRYPTED PRIVATE KEY ----",
        "token%3D" + KEY.replace("-", "%2D"),  # URL-escaped
        "&#115;&#107;&#45;" + KEY[3:],  # HTML entities
    ],
)
def test_secrets_the_policy_decodes_the_redaction_decodes(text: str) -> None:
    stored = redact(text)
    for secret in (KEY, KEY[-12:], PEM_BODY[-24:], PEM_BODY[:24]):
        assert secret not in drop_invisible(stored), stored
    assert REDACTED in stored and findings(text)


@pytest.mark.parametrize(
    "name", ["DB_PASS", "RT3_PASSPHRASE", "SMTP_PASSWD", "APP_SECRET", "BASIC_AUTH", "X_CREDENTIALS"]
)
def test_one_rule_names_credential_variables_and_their_values_are_redacted_everywhere(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eval_assets.redact import is_secret_env_name

    value = "v4lue-of-" + name.lower()
    monkeypatch.setenv(name, value)
    assert is_secret_env_name(name) and not is_secret_env_name("GIT_AUTHOR_NAME")
    assert value not in redact(f"connect failed: {value}")
    assert value not in scrub_error_text(f"judge call failed: BadRequestError: {value}")


def test_an_agent_raised_error_never_holds_a_password_value(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DB_PASS", "hunter2-" + "db-password")
    monkeypatch.setenv("RT3_PASSPHRASE", "correct horse " + "battery staple")
    build = _build(
        {
            "model": "sim/agent",
            "family": "sim",
            "params": {"skill": 1.0},
            "agent": {"entrypoint": "policy_agents:raises_with_a_password"},
        }
    )
    result = _attempt(_engine(project, tmp_path / "j.sqlite"), build, project.scenarios[PLAIN])
    assert result.call.error_kind == "agent_raised"
    error = result.call.error or ""
    assert "hunter2-db-password" not in error and "battery staple" not in error and REDACTED in error

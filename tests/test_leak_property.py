"""Secrets never persist (docs/specs/security.md, "The leak property"): hypothesis draws a secret from
every shape family and every environment-name family, plants it in the environment, a build
manifest, a scenario input, a trajectory export and a local echoing provider's reply (each response
field, each encoding), runs a small build through the capability track (litellm's real call path
against a server on 127.0.0.1), and asserts the secret appears nowhere under EVAL_HOME, in any file
the conversion could write, or on stdout/stderr. Fake credentials are built from parts at run time."""

from __future__ import annotations

import base64
import dataclasses
import json
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from invariants.security import scan_for_secret

from eval_assets.capability.materialize import materialize_scenario_runs
from eval_assets.capability.track import Track
from eval_assets.config import ConfigError, Project
from eval_assets.home import EvalHome, environment
from eval_assets.redact import SHAPES, findings
from eval_assets.trajectory import ExportRefused, convert_export

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
BODY = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _body(alphabet: str, n: int) -> st.SearchStrategy[str]:
    """`n` characters of `alphabet`, with a digit and an upper-case letter in them (random keys have both)."""
    return st.text(alphabet, min_size=n, max_size=n).map(lambda s: "7Q" + s)


# Each shape family: a strategy of (text to plant, the secret part that must never persist).
SHAPE_FAMILIES: dict[str, st.SearchStrategy[tuple[str, str]]] = {
    "sk-": _body(ALNUM + "-_", 30).map(lambda b: (f"call_{'sk'}-ant-{b}", f"{'sk'}-ant-{b}")),
    "sk_": _body(ALNUM, 24).map(lambda b: (f"lookup_{'sk'}_ant_{b}", f"{'sk'}_ant_{b}")),
    "stripe": _body(ALNUM, 20).map(lambda b: (f"{'rk'}_live_{b}", f"{'rk'}_live_{b}")),
    "AIza": _body(ALNUM + "_-", 34).map(lambda b: (f"x{'AI'}za{b}", f"{'AI'}za{b}")),
    "slack": _body(ALNUM, 20).map(lambda b: (f"{'xo'}xb-{b}", f"{'xo'}xb-{b}")),
    "slack-webhook": _body(ALNUM, 24).map(
        lambda b: (f"https://hooks.{'slack'}.com/services/T01/B02/{b}", f"B02/{b}")
    ),
    "github": st.tuples(st.sampled_from(["p", "o", "u", "s", "r"]), _body(ALNUM, 36)).map(
        lambda t: (f"{'gh'}{t[0]}_{t[1]}", f"{'gh'}{t[0]}_{t[1]}")
    ),
    "github-pat": _body(ALNUM + "_", 40).map(lambda b: (f"github_{'pat'}_{b}", f"github_{'pat'}_{b}")),
    "aws": st.text(UPPER, min_size=16, max_size=16).map(lambda b: (f"id{'AK'}IA{b}", f"{'AK'}IA{b}")),
    "jwt": _body(ALNUM, 20).map(
        lambda b: (f"{'ey'}JhbGciOiJIUzI1NiJ9.{'ey'}J{b}.{b}sig", f"{'ey'}J{b}.{b}sig")
    ),
    "pem": _body(BODY, 64).map(
        lambda b: (f"-----BEGIN {'PRIVATE'} KEY-----\n{b}\n-----END PRIVATE KEY-----", b)
    ),
    "url-password": _body(ALNUM + "${}/", 14).map(lambda b: ("https://app:" + b + "@db.internal/x", b)),
    "authorization": st.text("abcdefghijklmnopqrstuvwxyz", min_size=16, max_size=24).map(
        lambda b: (f"Authorization: Bearer {b}", b)
    ),
    "bearer": _body(ALNUM, 16).map(lambda b: (f"token: bearer {b}", b)),
    "cookie": _body(ALNUM, 20).map(lambda b: ("Cookie: " + "sid=" + b, b)),
    "credential-header": st.text("abcdefghijklmnopqrstuvwxyz", min_size=16, max_size=24).map(
        lambda b: (f"X-Portkey-{'Key'}: {b}", b)
    ),
    "assignment": _body(ALNUM, 16).map(lambda b: (f"DB_{'PASSWORD'}={b}", b)),
}

# Environment-name families: litellm's own credential names and names the one rule says are one.
ENV_FAMILIES = (
    "OPENAI_API_KEY",
    "AWS_BEARER_TOKEN_BEDROCK",
    "WATSONX_ZENAPIKEY",
    "HCP_VAULT_APPROLE_SECRET_ID",
    "CLARIFAI_PAT",
    "VAULT_PASSWORD",
    "GCP_CREDENTIALS",
    "SLACK_WEBHOOK_URL",
    "DB_PASS",  # outside litellm's list: names under the one rule (PASS, PASSPHRASE, AUTH, ...)
    "RT3_PASSPHRASE",
    "BASIC_AUTH",
)

SUBJECT_KEY = "OPENAI_API_KEY"  # the subject's own key variable (echoed by nobody here)
FIELDS = (
    "content",
    "tool_call_id",
    "tool_call_name",
    "tool_call_arguments",
    "refusal",
    "reasoning",
    "annotations",
    "error_body",
    "response_header",
    "echoed_input",
)


def encode(text: str, how: str) -> str:
    if how == "json":
        return json.dumps(text)[1:-1]
    if how == "url":
        return urllib.parse.quote(text, safe="")
    if how == "base64-header":
        return base64.b64encode(f"Authorization: Bearer {text}".encode()).decode()
    return text


@dataclasses.dataclass
class Plant:
    family: str
    text: str  # what is planted (before encoding)
    secret: str  # what must never persist
    how: str
    env_name: str | None  # the secret is this variable's value


@st.composite
def plants(draw: st.DrawFn) -> tuple[list[Plant], int]:
    """One secret of every shape family and every environment-name family, each in a drawn encoding,
    and the offset at which the provider starts its round of reply fields."""
    out = []
    for family in sorted(SHAPE_FAMILIES):
        text, secret = draw(SHAPE_FAMILIES[family])
        out.append(Plant(family, text, secret, draw(st.sampled_from(["plain", "json"])), None))
    for name in ENV_FAMILIES:
        value = draw(_body(ALNUM, 20).map(lambda b: f"plain{b}"))  # no shape: only its value gives it away
        out.append(
            Plant(name, value, value, draw(st.sampled_from(["plain", "json", "url", "base64-header"])), name)
        )
    return out, draw(st.integers(0, len(FIELDS) - 1))


class EchoingProvider:
    """An OpenAI-compatible server on 127.0.0.1 that puts `payload` into one field of each reply, taking
    the fields of `fields` in turn (request by request)."""

    def __init__(self) -> None:
        self.payload = ""
        self.fields: list[str] = ["content"]
        self.requests = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> EchoingProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def reply(self, request: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        p, field = self.payload, self.fields[(self.requests - 1) % len(self.fields)]
        message: dict[str, Any] = {
            "role": "assistant",
            "content": f"done: {p}" if field == "content" else "done",
        }
        headers: dict[str, str] = {}
        if field == "echoed_input":
            message["content"] = "you said: " + " | ".join(str(m.get("content")) for m in request["messages"])
        elif field.startswith("tool_call"):
            call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
            if field == "tool_call_id":
                call["id"] = f"call_{p}"
            elif field == "tool_call_name":
                call["function"]["name"] = f"lookup_{p}"
            else:
                call["function"]["arguments"] = json.dumps({"q": p})
            message["tool_calls"] = [call]
        elif field == "refusal":
            message["refusal"] = p
        elif field == "reasoning":
            message["reasoning_content"] = p
        elif field == "annotations":
            message["annotations"] = [
                {
                    "type": "url_citation",
                    "url_citation": {
                        "url": f"https://x.test/?q={p}",
                        "title": p,
                        "start_index": 0,
                        "end_index": 4,
                    },
                }
            ]
        elif field == "response_header":
            headers["X-Echo"] = p
        elif field == "error_body":
            return 400, {"error": {"message": f"bad request: {p}", "type": "invalid_request_error"}}, headers
        body = {
            "id": "chatcmpl-leak",
            "object": "chat.completion",
            "created": 1_764_460_800,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }
        return 200, body, headers

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

            def do_POST(self) -> None:  # noqa: N802
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                provider.requests += 1
                code, payload, headers = provider.reply(request)
                body = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

        return Handler


def tiny(project: Project, planted_input: str) -> Project:
    """One scenario, a repeat per reply field, its input carrying the planted text; one try per call;
    no judge ahead."""
    judge = project.active_judges[0]
    scenario = project.scenarios_judged_by(judge)[0]
    messages = [*scenario.input, type(scenario.input[0])(role="user", content=f"Also note: {planted_input}")]
    engine = project.settings.engine.model_copy(
        update={
            "max_tries": 1,
            "backoff_base_s": 0.0,
            "backoff_max_s": 0.0,
            "judge_ahead": False,
            "workers": 1,
        }
    )
    return dataclasses.replace(
        project,
        scenarios={scenario.id: scenario.model_copy(update={"repeats": len(FIELDS), "input": messages})},
        settings=project.settings.model_copy(update={"engine": engine}),
    )


def export_with(text: str) -> str:
    header = {"format": "agent-trajectory-export", "version": 1, "redacted": True}
    trajectory = {
        "task": "support",
        "title": "late order",
        "tools": [],
        "messages": [
            {"role": "user", "content": f"where is my order? {text}"},
            {"role": "assistant", "content": "It ships today."},
        ],
    }
    return json.dumps(header) + "\n" + json.dumps(trajectory) + "\n"


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(drawn=plants())
def test_a_planted_secret_persists_nowhere(
    drawn: tuple[list[Plant], int],
    project: Project,
    capfd: pytest.CaptureFixture[str],
    provider: EchoingProvider,
) -> None:
    planted, offset = drawn
    payload = " ; ".join(encode(p.text, p.how) for p in planted)
    secrets = [p.secret for p in planted]
    values = {SUBJECT_KEY: "plainsubjectkey" + planted[0].secret[-8:]}
    values |= {p.env_name: p.secret for p in planted if p.env_name is not None}
    provider.payload, provider.fields = payload, [*FIELDS[offset:], *FIELDS[:offset]]
    provider.requests = 0
    with tempfile.TemporaryDirectory(prefix="evaltrack-leak-") as tmp, environment(values):
        root = Path(tmp)
        home = EvalHome(root / "eval_home").ensure()
        track = Track(tiny(project, payload), home)
        try:
            manifest = {
                "id": "leak-build",
                "milestone": 0,
                "subject": {"model": "openai/gpt-4o-mini", "family": "openai", "api_base": provider.base},
            }
            (root / "bad.yaml").write_text(
                yaml.safe_dump(dict(manifest, id="leak-refused", description=f"note {payload}")),
                encoding="utf-8",
            )
            with pytest.raises(ConfigError) as refused_manifest:  # refused, and the refusal never repeats it
                track.register_build(root / "bad.yaml")
            (root / "bad.yaml").unlink()
            (root / "good.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
            build = track.register_build(root / "good.yaml")
            summary = materialize_scenario_runs(track, build.id, "leak-run")
        finally:
            if track._journal is not None:
                track.journal.close()
        export, out = root / "export.jsonl", root / "converted"
        export.write_text(export_with(payload), encoding="utf-8")
        with pytest.raises(ExportRefused) as refused_export:
            convert_export(export, out)
        export.unlink()
        findings, counts = scan_for_secret([home.root, root], secrets)
    captured = capfd.readouterr()
    shown = captured.out + captured.err + str(refused_manifest.value) + str(refused_export.value)
    assert provider.requests == len(FIELDS) and counts["parquet"] > 0, (provider.requests, counts)
    assert findings == [], findings
    assert [p.family for p in planted if p.secret in shown] == []
    assert summary["ok"] > 0 and summary["errors"] > 0, summary  # answers stored, and refused/failed calls


@pytest.fixture(scope="module")
def provider() -> Iterator[EchoingProvider]:
    with EchoingProvider() as server:
        yield server


@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_the_property_covers_every_shape_family_of_the_one_list(data: st.DataObject) -> None:
    """A shape added to redact.SHAPES without a family here fails this test."""
    covered = {
        label for strategy in SHAPE_FAMILIES.values() for label in findings(data.draw(strategy)[0], values=())
    }
    assert {s.label for s in SHAPES} <= covered


@pytest.mark.parametrize("field", ["tool_call_id", "tool_call_name"])
def test_a_key_in_a_tool_call_identifier_fails_the_call_unrepeated_and_still_paid(
    provider: EchoingProvider, field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from eval_assets.providers.gateway import CallSpec, ModelGateway

    key = "sk-" + "ant-api03-" + "Xy7Qw9Lm2" * 4
    provider.payload, provider.fields, provider.requests = key, [field], 0
    spec = CallSpec(
        "openai/gpt-4o-mini", [{"role": "user", "content": "hi"}], 16, 10.0, api_base=provider.base
    )
    monkeypatch.setenv(SUBJECT_KEY, "plainsubjectkey0123")
    outcome = asyncio.run(ModelGateway().call(spec))
    assert not outcome.ok and outcome.error_kind == "SecretInIdentifier"
    assert key not in str(outcome) and "tool call" in (outcome.error or "")
    assert outcome.cost_usd > 0 and outcome.prompt_tokens == 11  # the provider answered: the call is paid


def test_every_string_of_a_tool_call_is_redacted_by_the_gateway(
    provider: EchoingProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from eval_assets.providers.gateway import CallSpec, ModelGateway

    key = "gh" + "o_" + "A1b2C3d4E5" * 4
    provider.payload, provider.fields, provider.requests = key, ["tool_call_arguments"], 0
    spec = CallSpec(
        "openai/gpt-4o-mini", [{"role": "user", "content": "hi"}], 16, 10.0, api_base=provider.base
    )
    monkeypatch.setenv(SUBJECT_KEY, "plainsubjectkey0123")
    outcome = asyncio.run(ModelGateway().call(spec))
    assert outcome.ok and outcome.tool_calls and key not in str(outcome)
    assert "[redacted]" in outcome.tool_calls[0]["arguments"]

"""The model gateway: every model call goes through `litellm.acompletion`.

One try per `call()`; retries, journaling and ceilings belong to the spend path and the engine.
A provider error is returned as a `CallOutcome` with `ok=False`, never raised, and never carries
request kwargs or headers (they hold API keys). Every string of the response message (the answer,
tool-call ids, names and arguments, refusal, reasoning, annotations) and the error has been through
the one redaction (`eval_assets.redact`), walked rather than picked by field: a provider may echo the
key or the request's Authorization header anywhere, and what leaves here is stored, logged, and shown
to a judge. A credential in a tool call's id or function name is refused (the call fails with
`SecretInIdentifier`), never redacted into an identifier. No litellm callback is registered here:
callback kwargs hold the raw key.

Importing this module does not import litellm: the gateway readies it (`litellm_ready`: litellm
configured in its one place, `_litellm.py`, and the sim providers registered) at its first call, or
when it reads a price its table lacks. So a process that holds a gateway but calls no model (a run's
calling process, whose blocks run in worker processes) never loads litellm.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from types import ModuleType
from typing import Any

from eval_assets.providers._litellm import configured_litellm
from eval_assets.providers.scriptmodel import SCRIPT_PROVIDER, ModelScript
from eval_assets.redact import findings, redact, redact_any, redact_logs, without_traceback

# litellm warns once per registered custom price about cache pricing it cannot know; not actionable here.
logging.getLogger("LiteLLM").setLevel(logging.ERROR)
# litellm logs raw provider responses (at DEBUG); a provider may echo the key in them.
redact_logs(
    "LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm", "openai", "httpx", "httpcore", "eval_assets"
)

CALL_MODULES = ("eval_assets.providers.sim", "eval_assets.providers._first_call")
"""What a call imports besides this module (litellm, configured, the sim providers, and what litellm
imports lazily at its first call, `_first_call`): a fork server imports these once, ahead, so that the
workers it forks do not each import litellm at their first call."""


def import_call_modules() -> None:
    """Import `CALL_MODULES` now, so that no later call pays for them inside an event loop."""
    from eval_assets.providers import _first_call, sim  # noqa: F401  (the names of CALL_MODULES)


@functools.cache
def litellm_ready() -> ModuleType:
    """litellm, configured (`_litellm.configured_litellm`), with the sim providers registered: what
    any call needs, done once per process. Returns the litellm module."""
    from eval_assets.providers.sim import register_sim_providers  # imports litellm

    litellm = configured_litellm()
    register_sim_providers()
    return litellm


class UnpricedModel(Exception):
    """A model with no known price: refused before its first call, never treated as free."""

    def __init__(self, model: str):
        self.model = model
        super().__init__(
            f"model {model!r} has no known price: litellm's price map does not list it and "
            f"evaltrack.yaml does not register it. Add it under `prices:` in evaltrack.yaml, e.g.\n"
            f"  prices:\n    {model}: {{input_per_mtok: 3.0, output_per_mtok: 15.0}}"
        )


@dataclass(frozen=True)
class CallSpec:
    """One model request. `params` are passed to litellm as-is (decoding params, or sim knobs)."""

    model: str
    messages: list[dict[str, Any]]
    max_tokens: int
    timeout_s: float
    params: Mapping[str, Any] = field(default_factory=dict)
    api_base: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Served:
    """Where a `local/<name>` model answers (`LocalRoutes`): litellm's OpenAI-compatible provider."""

    litellm_model: str
    api_base: str
    api_key: str = field(repr=False)


LocalRoutes = Callable[[str], Served]
"""Serves local model NAME (starting its server when this process may); raises with a one-line reason."""

LOCAL_PREFIX = "local/"


def litellm_completion(spec: CallSpec, metadata: Mapping[str, Any], served: Served | None = None) -> Any:
    """The coroutine of the one `litellm.acompletion` request a try of `spec` makes (the gateway's,
    and the bare-litellm floor of benchmarks/throughput.py): one try (litellm retries nothing), `spec`'s
    params as given, its `api_base` and `tools` when set, and `metadata` (what the sim provider and a
    script model read)."""
    kwargs: dict[str, Any] = dict(spec.params)
    # a `max_tokens` among the params is a lower cap, never a higher one (the scenario's or judge's
    # max_output_tokens bounds every reply); the other names the track sets itself are refused when the
    # file is validated (config.TRACK_SET_PARAMS)
    max_tokens = (
        min(int(kwargs.pop("max_tokens")), spec.max_tokens) if "max_tokens" in kwargs else spec.max_tokens
    )
    if spec.api_base:
        kwargs["api_base"] = spec.api_base
    if spec.tools:
        kwargs["tools"] = spec.tools
    if served is not None:  # the track's own server: its address and key, never the spec's
        kwargs["api_base"], kwargs["api_key"] = served.api_base, served.api_key
    return litellm_ready().acompletion(
        model=spec.model if served is None else served.litellm_model,
        messages=spec.messages,
        max_tokens=max_tokens,
        timeout=spec.timeout_s,
        num_retries=0,
        max_retries=0,
        metadata=metadata,
        **kwargs,
    )


@dataclass(frozen=True)
class CallOutcome:
    ok: bool
    text: str | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_s: float
    error_kind: str | None = None  # exception class name, or 'timeout'
    error: str | None = None
    retryable: bool = False
    tool_calls: list[dict[str, Any]] | None = None
    overloaded: bool = False  # the provider said it is over its rate limit or overloaded (429, 503, 529)
    retry_after_s: float | None = None  # the provider's Retry-After, seconds (only ever that header's value)
    raw_text: str | None = field(default=None, repr=False, compare=False)
    """The answer as the model wrote it, before redaction: in memory only, for the policy checks (never
    journaled, stored, logged or traced; `text` is what is kept)."""
    raw_tool_calls: tuple[str, ...] = field(default=(), repr=False, compare=False)
    """Each tool call's function name and arguments as the model wrote them: in memory only, for the
    policy checks, like `raw_text`."""
    policy_failures: int | None = None  # the policy checks' count on the raw answer (set by the spend path)
    policy_hits: frozenset[int] | None = None  # which forbidden strings (set by the spend path)
    finish_reason: str | None = None  # the answer's finish reason ("stop", "length", "tool_calls"), if given


@functools.cache
def retryable_errors() -> tuple[type[BaseException], ...]:
    """litellm's errors that are transient by nature: the same request may succeed later."""
    litellm = configured_litellm()
    return (
        litellm.RateLimitError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.APIConnectionError,
        litellm.Timeout,
    )


@functools.cache
def overload_errors() -> tuple[type[BaseException], ...]:
    """litellm's errors that say rate limited or overloaded: the engine's adaptive limiter backs off on
    these (engine/_limiter.py)."""
    litellm = configured_litellm()
    return (litellm.RateLimitError, litellm.ServiceUnavailableError)


OVERLOAD_STATUS = frozenset({429, 503, 529})  # 529: "overloaded", which litellm maps to a plain APIError


def is_overload(exc: BaseException) -> bool:
    return isinstance(exc, overload_errors()) or getattr(exc, "status_code", None) in OVERLOAD_STATUS


def retry_after_s(exc: BaseException, now: datetime | None = None) -> float | None:
    """The wait a provider asked for in its error response, in seconds, or None.

    Reads only `retry-after-ms` (OpenAI's, milliseconds) and `Retry-After` (seconds, or an HTTP date)
    from the response litellm attaches to the exception; no other header is looked at or kept (the
    request's headers hold the key). A value that does not parse, or is negative, is no value.
    """
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None or not hasattr(headers, "items"):
        return None
    wanted = {
        str(k).lower(): v for k, v in headers.items() if str(k).lower() in ("retry-after", "retry-after-ms")
    }
    millis = _number(wanted.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    raw = wanted.get("retry-after")
    if raw is None:
        return None
    seconds = _number(raw)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(str(raw))
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _number(raw: object) -> float | None:
    try:
        value = float(str(raw).strip())
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value >= 0.0 else None


def _safe_message(exc: BaseException) -> str:
    """The exception's own message on one line, any traceback in it cut to its last line, redacted,
    then truncated (redacting first: a cut never splits a key into a part the redaction no longer
    recognises).

    litellm's messages carry no request headers, but they quote the provider's error body, and a
    provider or proxy may echo the key or the request (Authorization header included) there.
    """
    msg = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return redact(" ".join(without_traceback(str(msg)).split()))[:500]


class SecretInIdentifier(Exception):
    """A response put a credential where it would become an identifier (a tool call's id or name):
    refused rather than redacted, since a redacted id no longer names its call."""


def _walked_message(message: Any) -> dict[str, Any]:
    """Every string of the response message (content, tool-call ids, names and arguments, refusal,
    reasoning, annotations, provider-specific fields) through the one redaction; raises
    SecretInIdentifier when a tool call's id or function name holds a credential."""
    raw = message.model_dump() if hasattr(message, "model_dump") else dict(message)
    for call in raw.get("tool_calls") or []:
        function = call.get("function") or {}
        for where, value in (("id", call.get("id")), ("function name", function.get("name"))):
            if isinstance(value, str) and (found := findings(value)):
                raise SecretInIdentifier(
                    f"the provider put a credential ({', '.join(found)}) in a tool call's {where}; "
                    "refused (an identifier is never redacted)"
                )
    walked = redact_any(raw)
    return walked if isinstance(walked, dict) else {}


def _raw_tool_call_texts(calls: Any) -> list[str]:
    """The function name and arguments of each raw tool call (objects or dicts), unredacted."""
    out: list[str] = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else getattr(call, "function", None)
        for part in ("name", "arguments"):
            value = function.get(part) if isinstance(function, dict) else getattr(function, part, None)
            if value is not None:
                out.append(value if isinstance(value, str) else json.dumps(value, default=str))
    return out


ScriptSource = Callable[[str], ModelScript]
"""Loads the script `script/NAME` plays (by NAME); raises when it cannot (the message says why)."""


class ModelGateway:
    """Routes calls through litellm and prices them; knows litellm's map plus registered prices."""

    def __init__(
        self,
        prices: Mapping[str, tuple[float, float]] | None = None,
        scripts: ScriptSource | None = None,
        local: LocalRoutes | None = None,
    ):
        """`prices`: model -> (USD per input token, USD per output token) for models litellm lacks.
        `scripts`: where `script/NAME` models find their script (the project's loader); without it a
        script model's call fails (never a silent answer). `local`: where `local/NAME` models are served
        (without it their calls fail, named). Nothing of litellm is loaded here (`ready`)."""
        self._scripts = scripts
        self._local = local
        self._prices: dict[str, tuple[float, float]] = dict(prices or {})
        self._ready = False

    def ready(self) -> ModuleType:
        """litellm readied for this gateway's calls (`litellm_ready`) and taught its registered prices,
        once: litellm prices every response itself (in its logging path, and the sim providers stamp
        that price), so it finds them directly instead of searching its map for a near match. Done by
        the first call; returns the litellm module."""
        litellm = litellm_ready()
        if not self._ready:
            if self._prices:
                litellm.register_model(
                    {
                        model: {
                            "input_cost_per_token": inp,
                            "output_cost_per_token": out,
                            "litellm_provider": model.partition("/")[0],
                            "mode": "chat",
                        }
                        for model, (inp, out) in self._prices.items()
                    }
                )
            self._ready = True
        return litellm

    def price(self, model: str) -> tuple[float, float]:
        """(input, output) USD per token; raises UnpricedModel. Registered prices win over litellm's map
        (read only for a model the table lacks: the one price read that loads litellm)."""
        if model in self._prices:
            return self._prices[model]
        try:
            info = configured_litellm().get_model_info(model)
        except Exception as exc:
            raise UnpricedModel(model) from exc
        inp, out = info.get("input_cost_per_token"), info.get("output_cost_per_token")
        if inp is None or out is None:
            raise UnpricedModel(model)
        return float(inp), float(out)

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        inp, out = self.price(model)
        return prompt_tokens * inp + completion_tokens * out

    def worst_case_cost(self, spec: CallSpec) -> float:
        """Upper bound of one call's cost: the prompt (≈ chars/3, generous) plus the full token bound."""
        chars = sum(len(str(m.get("content") or "")) for m in spec.messages)
        if spec.tools:
            chars += len(str(spec.tools))
        return self.cost(spec.model, chars // 3 + 16, spec.max_tokens)

    def _script_metadata(self, model: str) -> dict[str, Any]:
        """`{"script": ...}` for a `script/NAME` model (its script as plain data), else {}."""
        provider, _, name = model.partition("/")
        if provider != SCRIPT_PROVIDER:
            return {}
        if self._scripts is None:
            raise LookupError(
                f"no script source: the gateway was built without one, so {model!r} has no script"
            )
        return {"script": self._scripts(name).model_dump(mode="json")}

    async def call(self, spec: CallSpec) -> CallOutcome:
        """One try. Never raises for provider failures; the hard timeout is enforced here too."""
        started = time.perf_counter()
        self.ready()
        try:
            script = self._script_metadata(spec.model)
        except Exception as exc:  # a script that does not load is this call's failure, never an answer
            return self._failure(started, "ScriptUnavailable", _safe_message(exc), False, exc)
        served = None
        if spec.model.startswith(LOCAL_PREFIX):
            try:
                if self._local is None:
                    raise LookupError(
                        f"no local model servers: the gateway was built without them ({spec.model!r})"
                    )
                # may start the server (seconds): off the event loop, so other calls go on meanwhile
                served = await asyncio.to_thread(self._local, spec.model.removeprefix(LOCAL_PREFIX))
            except Exception as exc:  # an unservable local model is this call's failure, never an answer
                return self._failure(started, "LocalModelUnavailable", _safe_message(exc), False, exc)
        try:
            response = await asyncio.wait_for(
                litellm_completion(spec, {**spec.metadata, **script}, served), timeout=spec.timeout_s + 1.0
            )
        except TimeoutError as exc:
            return self._failure(started, "timeout", f"no answer within {spec.timeout_s:g}s", True, exc)
        except retryable_errors() as exc:
            return self._failure(started, type(exc).__name__, _safe_message(exc), True, exc)
        except Exception as exc:  # a provider error is an outcome, never a score
            return self._failure(started, type(exc).__name__, _safe_message(exc), False, exc)
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        choice = response.choices[0]
        finish_reason = getattr(choice, "finish_reason", None)
        try:
            message = _walked_message(response.choices[0].message)
        except SecretInIdentifier as exc:  # paid for: the refusal keeps the call's tokens and cost
            return dataclasses.replace(
                self._failure(started, "SecretInIdentifier", str(exc), False, exc),
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cost_usd=self.cost(spec.model, prompt_tokens, completion_tokens),
            )
        tool_calls = None
        if message.get("tool_calls"):
            tool_calls = [
                {
                    "id": tc.get("id"),
                    "name": (tc.get("function") or {}).get("name"),
                    "arguments": (tc.get("function") or {}).get("arguments"),
                }
                for tc in message["tool_calls"]
            ]
        content = message.get("content")
        raw_calls = getattr(response.choices[0].message, "tool_calls", None) or []
        return CallOutcome(
            ok=True,
            text=str(content) if content is not None else "",
            raw_text=str(raw)
            if (raw := getattr(response.choices[0].message, "content", None)) is not None
            else "",
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=self.cost(spec.model, prompt_tokens, completion_tokens),
            latency_s=time.perf_counter() - started,
            tool_calls=tool_calls,
            raw_tool_calls=tuple(_raw_tool_call_texts(raw_calls)),
            finish_reason=str(finish_reason) if finish_reason else None,
        )

    @staticmethod
    def _failure(started: float, kind: str, message: str, retryable: bool, exc: BaseException) -> CallOutcome:
        overloaded = is_overload(exc)
        return CallOutcome(
            ok=False,
            text=None,
            prompt_tokens=0,
            completion_tokens=0,
            cost_usd=0.0,
            latency_s=time.perf_counter() - started,
            error_kind=kind,
            error=message,
            retryable=retryable,
            overloaded=overloaded,
            retry_after_s=retry_after_s(exc) if overloaded else None,
        )

"""OpenTelemetry spans from the global tracer provider (a leaf: imports nothing from the project).

The project never constructs a tracer provider or an exporter: `trace.get_tracer` returns the API's
proxy tracer, which follows whatever provider the process installs (the SDK with
`opentelemetry-instrument`, a sitecustomize, a test fixture) and is a no-op when none is installed.
With no provider the decorated call runs bare (no span object, no context switch), and attributes
are gathered only when a span records.

Span names: `eval.run` (one materialization of the track), `eval.attempt` (one subject attempt),
`eval.judge` (one judge verdict), `chat {model}` (one try of a model call, OpenTelemetry's GenAI
semantic conventions: `gen_ai.*` beside the call's `eval.*` identity, cost and whether it was paid or
reused), `eval.decision` (one release decision). Attributes are limited to `ATTRIBUTES`:
identifiers, numbers, token counts, costs, finish reasons and error kinds; never free text (no
output, prompt, error message or key). A failed attempt, verdict or call ends with status ERROR
and the error's kind as its description.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from opentelemetry import context, propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

TRACER_NAME = "eval-track"
ATTRIBUTES = frozenset(
    {
        "eval.asset",
        "eval.build",
        "eval.scenario",
        "eval.repeat",
        "eval.status",
        "eval.judge",
        "eval.rubric",
        "eval.score.value",
        "eval.score.source",
        "eval.decision",
        "eval.dagster_run_id",
        "eval.role",
        "eval.attempt_key",
        "eval.try",
        "eval.turn",
        "eval.cost_usd",
        "eval.paid",
        "eval.reused",
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.request.model",
        "gen_ai.request.max_tokens",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.response.finish_reasons",
        "error.type",
    }
)
"""Every attribute a span may carry. `gen_ai.*` and `error.type` are OpenTelemetry's GenAI semantic
conventions for a model call; `eval.*` are this project's (docs/tracing.md lists each)."""

P = ParamSpec("P")
R = TypeVar("R")
AttributeValue = str | int | float | bool | Sequence[str] | None
ArgsAttributes = Callable[[Mapping[str, Any]], Mapping[str, AttributeValue]]
ResultAttributes = Callable[[Any], Mapping[str, AttributeValue]]
ResultError = Callable[[Any], str | None]

_tracer = trace.get_tracer(TRACER_NAME)


def allowed(attributes: Mapping[str, AttributeValue]) -> dict[str, str | int | float | bool | Sequence[str]]:
    """The attributes a span may carry: keys in `ATTRIBUTES` with a value (None is left out).
    Raises ValueError for any other key, so a new attribute is a deliberate change here."""
    unknown = sorted(set(attributes) - ATTRIBUTES)
    if unknown:
        raise ValueError(f"span attributes outside tracing.ATTRIBUTES: {unknown}")
    return {k: v for k, v in attributes.items() if v is not None}


def installed() -> bool:
    """Whether the process has installed a tracer provider (the API still hands out its proxy when
    none is): without one a span would be the no-op span, so the decorated call runs bare."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def fail(span: trace.Span, error_type: str) -> None:
    """End `span` as an error: status ERROR described by the error's kind, and `error.type` (the
    GenAI conventions' attribute). Only the kind: an error message may quote the provider."""
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, error_type))


def traced(
    name: str,
    arguments: ArgsAttributes,
    result: ResultAttributes | None = None,
    error: ResultError | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function (or coroutine function) to run inside a span `name`, a child of the
    current span. `arguments(bound_arguments)` gives the attributes known at the start, `result(value)`
    those known at the end, `error(value)` the error kind of a value that is a failure (the span then
    ends with status ERROR; None: it did not fail); all are called only when the span records (never
    with no provider). An exception raised inside marks the span ERROR too (the API's default)."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(fn)

        def start(span: trace.Span, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if span.is_recording():
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                span.set_attributes(allowed(arguments(bound.arguments)))

        def end(span: trace.Span, value: Any) -> None:
            if not span.is_recording():
                return
            if result is not None:
                span.set_attributes(allowed(result(value)))
            if error is not None and (kind := error(value)) is not None:
                fail(span, kind)

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                if not installed():
                    return await fn(*args, **kwargs)  # type: ignore[misc]
                with _tracer.start_as_current_span(name) as span:
                    start(span, args, kwargs)
                    value = await fn(*args, **kwargs)
                    end(span, value)
                    return value

            return run_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            if not installed():
                return fn(*args, **kwargs)
            with _tracer.start_as_current_span(name) as span:
                start(span, args, kwargs)
                value = fn(*args, **kwargs)
                end(span, value)
                return value

        return run

    return decorate


class CallSpan:
    """The span of one model call, as `model_call` yields it: `end` records what the call returned."""

    def __init__(self, span: trace.Span | None):
        self._span = span

    def end(self, attributes: Callable[[], Mapping[str, AttributeValue]], error_type: str | None) -> None:
        """Set `attributes()` (called only when the span records) and, for a failed call, ERROR with
        `error_type`."""
        if self._span is None or not self._span.is_recording():
            return
        self._span.set_attributes(allowed(attributes()))
        if error_type is not None:
            fail(self._span, error_type)


@contextmanager
def model_call(
    operation: str, model: str, attributes: Callable[[], Mapping[str, AttributeValue]]
) -> Iterator[CallSpan]:
    """A CLIENT span named `"{operation} {model}"` (the GenAI conventions' name) around one model
    call, a child of the current span, with `gen_ai.operation.name`, `gen_ai.request.model` and
    `attributes()` (called only when it records). With no provider it yields a span that records
    nothing."""
    if not installed():
        yield CallSpan(None)
        return
    with _tracer.start_as_current_span(f"{operation} {model}", kind=SpanKind.CLIENT) as span:
        if span.is_recording():
            span.set_attributes(
                allowed({"gen_ai.operation.name": operation, "gen_ai.request.model": model, **attributes()})
            )
        yield CallSpan(span)


def carrier() -> dict[str, str]:
    """The current span's context as W3C trace-context headers (empty with no provider), for a worker
    process to continue the run's trace (`continued`)."""
    headers: dict[str, str] = {}
    if installed():
        propagate.inject(headers)
    return headers


@contextmanager
def continued(headers: Mapping[str, str]) -> Iterator[None]:
    """Make the span `headers` (from `carrier`) the current parent, so spans started inside join its
    trace; then flush the process's provider, since a worker process exits without running its
    atexit hooks (its last batch of spans would be lost)."""
    token = context.attach(propagate.extract(dict(headers))) if headers else None
    try:
        yield
    finally:
        if token is not None:
            context.detach(token)
        flush = getattr(trace.get_tracer_provider(), "force_flush", None)
        if flush is not None and installed():
            flush()

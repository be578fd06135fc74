"""OpenTelemetry spans from the global tracer provider (a leaf: imports nothing from the project).

The project never constructs a tracer provider or an exporter: `trace.get_tracer` returns the API's
proxy tracer, which follows whatever provider the process installs (the SDK with
`opentelemetry-instrument`, a sitecustomize, a test fixture) and is a no-op when none is installed.
With no provider the decorated call runs bare (no span object, no context switch), and attributes
are gathered only when a span records.

Span names: `eval.run` (one materialization of the track), `eval.attempt` (one subject attempt),
`eval.judge` (one judge verdict), `eval.decision` (one release decision). Attributes are limited to
`ATTRIBUTES`: identifiers, repeat numbers, scores and the decision. Never a cost (the provider
calls' own instrumentation owns cost), never free text (no output, prompt, error or key).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

from opentelemetry import trace

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
    }
)

P = ParamSpec("P")
R = TypeVar("R")
AttributeValue = str | int | float | bool | None
ArgsAttributes = Callable[[Mapping[str, Any]], Mapping[str, AttributeValue]]
ResultAttributes = Callable[[Any], Mapping[str, AttributeValue]]

_tracer = trace.get_tracer(TRACER_NAME)


def allowed(attributes: Mapping[str, AttributeValue]) -> dict[str, str | int | float | bool]:
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


def traced(
    name: str, arguments: ArgsAttributes, result: ResultAttributes | None = None
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function (or coroutine function) to run inside a span `name`, a child of the
    current span. `arguments(bound_arguments)` gives the attributes known at the start, `result(value)`
    those known at the end; both are called only when the span records (never with no provider)."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(fn)

        def start(span: trace.Span, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if span.is_recording():
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                span.set_attributes(allowed(arguments(bound.arguments)))

        def end(span: trace.Span, value: Any) -> None:
            if result is not None and span.is_recording():
                span.set_attributes(allowed(result(value)))

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

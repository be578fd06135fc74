"""A failing step stores one redacted line naming its root cause, never a Python stack
(docs/specs/security.md, "No stack is stored"); `mask_user_code_errors` turns the masking on when
the location loads.

Dagster stores a step's error with its stack frames and its causes' stacks in the run's event log.
Its own switch, DAGSTER_REDACT_USER_CODE_ERRORS, stores every error raised inside a step's user-code
boundary (the compute function, resources, inputs and outputs) with no frames and no causes; under it
an exception's message is masked too, so each asset body turns what it raised into a `dg.Failure`
whose description is the one line `evaltrack run` prints (`error_line`) and whose metadata holds the
cause chain, one line per exception.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import dagster as dg

from eval_assets.home import EvalHome
from eval_assets.redact import error_chain, redact

REDACT_SWITCH = "DAGSTER_REDACT_USER_CODE_ERRORS"
CAUSES_KEY = "causes"  # the Failure's metadata: the cause chain, outermost first, no frames



def mask_user_code_errors(home: EvalHome) -> None:
    """Turn Dagster's masking on in this process (every process that loads the location calls this
    before it runs anything): the switch Dagster reads whenever a step's error is serialized, and
    the one handler of the logger Dagster hands each masked error to, stack included."""
    os.environ[REDACT_SWITCH] = "1"
    masked = logging.getLogger(os.getenv("DAGSTER_REDACTED_ERROR_LOGGER_NAME", "dagster.redacted_errors"))
    masked.propagate = False
    for handler in [h for h in masked.handlers if isinstance(h, MaskedErrors)]:
        masked.removeHandler(handler)
    masked.addHandler(MaskedErrors(home))


class MaskedErrors(logging.Handler):
    """Where Dagster's masked errors go: the error ID and the cause chain, redacted, appended to the
    home's debug log (never a frame), so an operator can look up the ID a run page or a sensor tick
    shows."""

    def __init__(self, home: EvalHome) -> None:
        super().__init__()
        self.home = home

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        chain = error_chain(error) if error is not None else []
        try:
            self.home.append_debug(redact(record.getMessage()), chain)
        except OSError:  # the log cannot be written: the masked note still names the ID
            pass

F = TypeVar("F", bound=Callable[..., Any])


def as_failure(exc: Exception) -> dg.Failure:
    """`exc` as the step's failure: one redacted line naming its root cause, the chain as metadata."""
    if isinstance(exc, dg.Failure):  # a step's own refusal (release_approval): its words, redacted
        chain = [redact(exc.description or type(exc).__name__)]
        metadata = dict(exc.metadata or {})
    else:
        chain, metadata = error_chain(exc), {}
    return dg.Failure(
        description=chain[-1],
        metadata={**metadata, CAUSES_KEY: dg.MetadataValue.text("\n".join(chain))},
        allow_retries=False,
    )


def one_line_asset(**kwargs: Any) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """`dg.asset(**kwargs)` over a body wrapped in `one_line_failure`: how every asset of the location
    is declared, so none can fail with Dagster's masked message instead of its root cause."""

    def declare(fn: Callable[..., Any]) -> dg.AssetsDefinition:
        return dg.asset(**kwargs)(one_line_failure(fn))

    return declare


def one_line_failure(fn: F) -> F:
    """Wrap an asset's body so that anything it raises fails the step as `as_failure` (generator
    bodies included); Dagster reads the signature through `functools.wraps`."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def generating(*args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 (every failure of the step, as one line)
                raise as_failure(exc) from None

        generating.one_line_failure = True  # type: ignore[attr-defined]
        return generating  # type: ignore[return-value]

    @functools.wraps(fn)
    def calling(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 (every failure of the step, as one line)
            raise as_failure(exc) from None

    calling.one_line_failure = True  # type: ignore[attr-defined]
    return calling  # type: ignore[return-value]

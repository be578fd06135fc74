"""The attributes of the engine's spans (eval_assets.tracing): an attempt, a judge verdict, and one try
of a model call (OpenTelemetry's GenAI conventions beside the call's `eval.*` identity)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from eval_assets.spend import AttemptRef, Refused, Reused
from eval_assets.tracing import AttributeValue

from ._results import JudgeResult, SubjectResult

if TYPE_CHECKING:
    from eval_assets.providers.gateway import CallOutcome, CallSpec


def attempt_started(args: Mapping[str, Any]) -> dict[str, AttributeValue]:
    return {
        "eval.build": args["build"].id,
        "eval.scenario": args["scenario"].id,
        "eval.repeat": args["repeat"],
    }


def attempt_ended(result: SubjectResult) -> dict[str, AttributeValue]:
    return {
        "eval.status": result.call.status,
        "eval.cost_usd": result.call.cost_usd,
        "eval.reused": result.call.reused,
        "eval.try": result.call.tries,
    }


def attempt_error(result: SubjectResult) -> str | None:
    """The error kind of an errored attempt (its span ends ERROR); an excluded one is no error."""
    return (result.call.error_kind or "error") if result.call.status == "error" else None


def judge_started(args: Mapping[str, Any]) -> dict[str, AttributeValue]:
    return {
        "eval.build": args["build"].id,
        "eval.scenario": args["scenario"].id,
        "eval.repeat": args["attempt"].repeat,
        "eval.judge": args["judge"].version_id,
        "eval.rubric": args["rubric"].key,
    }


def judge_ended(result: JudgeResult) -> dict[str, AttributeValue]:
    verdict = result.verdict
    scored = verdict is not None and verdict.status == "scored"
    return {
        "eval.status": result.status,
        "eval.score.value": verdict.score if scored and verdict is not None else None,
        "eval.score.source": "model",  # a model judge's verdict (human scores never pass here)
        "eval.cost_usd": result.cost_usd,
        "eval.reused": result.reused,
    }


def judge_error(result: JudgeResult) -> str | None:
    """A failed verdict's span ends ERROR (`verdict_failed`); the reason stays in the warehouse row."""
    return "verdict_failed" if result.status == "failed" else None


def call_started(run_id: str, ref: AttemptRef, try_no: int, spec: CallSpec) -> dict[str, AttributeValue]:
    """What one try of a model call is for, known before it is made."""
    return {
        "gen_ai.provider.name": spec.model.partition("/")[0] if "/" in spec.model else spec.model,
        "gen_ai.request.max_tokens": spec.max_tokens,
        "eval.dagster_run_id": run_id,
        "eval.build": ref.build,
        "eval.scenario": ref.scenario_id,
        "eval.repeat": ref.repeat,
        "eval.role": ref.role,
        "eval.judge": ref.judge_version,
        "eval.attempt_key": ref.attempt(try_no).key,
        "eval.try": try_no,
        "eval.turn": ref.turn,
    }


def call_ended(outcome: CallOutcome | Refused | Reused) -> dict[str, AttributeValue]:
    """What the try came to: tokens, cost, and whether it was paid now, read back (reused) or refused
    (neither: no call was made)."""
    if isinstance(outcome, Refused):
        return {"eval.paid": False, "eval.reused": False, "eval.cost_usd": 0.0, "eval.status": "excluded"}
    reused = isinstance(outcome, Reused)
    return {
        "gen_ai.usage.input_tokens": outcome.prompt_tokens,
        "gen_ai.usage.output_tokens": outcome.completion_tokens,
        "gen_ai.response.finish_reasons": None
        if reused or outcome.finish_reason is None  # type: ignore[union-attr]
        else [outcome.finish_reason],  # type: ignore[union-attr]
        "eval.cost_usd": outcome.cost_usd,
        "eval.paid": not reused,
        "eval.reused": reused,
        "eval.status": "ok" if outcome.ok else "error",
    }


def call_error(outcome: CallOutcome | Refused | Reused) -> str | None:
    """The error kind of a failed try (its span ends ERROR); a refused reservation is no error."""
    if isinstance(outcome, Refused) or outcome.ok:
        return None
    return outcome.error_kind or "error"

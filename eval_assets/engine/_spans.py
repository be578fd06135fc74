"""The attributes of the engine's spans (eval_assets.tracing): an attempt and a judge verdict."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval_assets.tracing import AttributeValue

from ._results import JudgeResult, SubjectResult


def attempt_started(args: Mapping[str, Any]) -> dict[str, AttributeValue]:
    return {
        "eval.build": args["build"].id,
        "eval.scenario": args["scenario"].id,
        "eval.repeat": args["repeat"],
    }


def attempt_ended(result: SubjectResult) -> dict[str, AttributeValue]:
    return {"eval.status": result.call.status}


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
    }

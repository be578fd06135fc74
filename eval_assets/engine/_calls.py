"""The one place a subject or judge call is built: the engine and the gate cases both build here, so
a case exercises the very request the track sends."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval_assets.config import Judge, Rubric, Scenario, Subject
from eval_assets.judging import render_judge_prompt, verdict_schema
from eval_assets.providers.gateway import CallSpec


def _identity(build: str, scenario_id: str, repeat: int, extra: Mapping[str, Any]) -> dict[str, Any]:
    return {"build": build, "scenario_id": scenario_id, "repeat": repeat, **extra}


def subject_spec(
    subject: Subject,
    scenario: Scenario,
    *,
    build: str,
    repeat: int,
    timeout_s: float,
    extra: Mapping[str, Any] | None = None,
) -> CallSpec:
    """The subject's call for one attempt: the scenario's input after the subject's system prompt.

    `metadata` names the attempt (build, scenario, repeat, `extra`, role); the sim provider draws from it.
    """
    messages = [m.model_dump() for m in scenario.input]
    if subject.system_prompt:
        messages = [{"role": "system", "content": subject.system_prompt}, *messages]
    return CallSpec(
        model=subject.model,
        messages=messages,
        max_tokens=scenario.max_output_tokens,
        timeout_s=timeout_s,
        params=subject.params,
        api_base=subject.api_base,
        metadata={**_identity(build, scenario.id, repeat, extra or {}), "role": "subject"},
    )


def judge_params(judge: Judge, rubric: Rubric) -> dict[str, Any]:
    """The judge's params as sent: a parser-2 judge also asks for the rubric's verdict schema (the
    server constrains its reply to it: llama.cpp's grammar from `response_format`)."""
    if judge.parser_version == 2:
        return {**judge.params, "response_format": {"type": "json_object", "schema": verdict_schema(rubric)}}
    return dict(judge.params)


def judge_spec(
    judge: Judge,
    rubric: Rubric,
    scenario: Scenario,
    output: str,
    *,
    nonce: str,
    build: str,
    repeat: int,
    timeout_s: float,
    extra: Mapping[str, Any] | None = None,
    trajectory: str | None = None,
) -> CallSpec:
    """The judge's call scoring `output`: the one judge prompt, fenced with `nonce` (with the agent's
    stored `trajectory` when the rubric asks for it)."""
    return CallSpec(
        model=judge.model,
        messages=render_judge_prompt(judge, rubric, scenario, output, nonce=nonce, trajectory=trajectory),
        max_tokens=judge.max_output_tokens,
        timeout_s=timeout_s,
        params=judge_params(judge, rubric),
        api_base=judge.api_base,
        metadata={
            **_identity(build, scenario.id, repeat, extra or {}),
            "role": "judge",
            "judge_version": judge.version_id,
        },
    )

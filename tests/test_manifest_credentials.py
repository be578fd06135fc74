"""A build manifest is copied under EVAL_HOME/builds: it refuses a credential wherever it appears,
naming the field and never repeating the value. Fake credentials are built from parts at run time."""

from __future__ import annotations

from typing import Any

import pytest

from eval_assets.config import BuildManifest, Judge, validate_model


def k(*parts: str) -> str:
    return "".join(parts)


def manifest(**subject: Any) -> dict[str, Any]:
    return {"id": "b1", "milestone": 0, "subject": {"model": "openai/gpt-4o-mini", "family": "openai", **subject}}


def refused(data: dict[str, Any]) -> list[str]:
    model, problems = validate_model(BuildManifest, data, "b1.yaml")
    assert model is None, "accepted"
    return [str(p) for p in problems]


@pytest.mark.parametrize(
    "params",
    [
        {"extra_headers": {k("X-Portkey-", "Key"): "lettersonly"}},
        {"default_headers": {k("Coo", "kie"): "sid=abc"}},
        {"headers": {"x": "y"}},
        {"client_args": {"headers": {"X-Any": "v"}}},
        {"aws_secret_access_key": "abc"},
    ],
    ids=["extra_headers", "default_headers", "headers", "nested-headers", "aws-secret"],
)
def test_a_header_map_or_key_name_anywhere_in_params_is_refused_by_name(params: dict[str, Any]) -> None:
    [problem] = refused(manifest(params=params))
    assert "subject.params" in problem and "environment variable" in problem
    assert all(str(v) not in problem for v in params.values() if isinstance(v, str))


@pytest.mark.parametrize(
    "password", ["pa$ss{w}rd9", "p/ss/word", "plainletters"], ids=["dollar-braces", "slash", "letters"]
)
def test_an_api_base_with_any_url_password_is_refused(password: str) -> None:
    [problem] = refused(manifest(api_base=k("https://user:", password, "@proxy.example/v1")))
    assert "subject.api_base" in problem and password not in problem


def test_a_credential_in_the_system_prompt_is_refused() -> None:
    key = k("sk-", "proj-", "a1b2c3d4" * 3)
    [problem] = refused(manifest(system_prompt=f"You may use {key} to call the API."))
    assert "subject.system_prompt" in problem and key not in problem


def test_a_credential_in_the_description_is_refused() -> None:
    key = k("AK", "IA", "Z2X3C4V5B6N7M8L9")
    data = {**manifest(), "description": f"candidate; deploy key {key}"}
    [problem] = refused(data)
    assert "description" in problem and key not in problem


def test_ordinary_params_are_accepted() -> None:
    model, problems = validate_model(
        BuildManifest, manifest(params={"max_tokens": 256, "temperature": 0.2}, system_prompt="Be brief."), "b1.yaml"
    )
    assert model is not None, problems


@pytest.mark.parametrize("name", ["max_retries", "num_retries", "timeout", "metadata", "model", "messages"])
def test_params_the_track_sets_on_every_request_are_refused_naming_the_file_and_field(name: str) -> None:
    """One try per request (the engine retries and the spend path pays each try), the engine's timeout,
    the attempt's metadata: a manifest or judge naming one would have every call fail with the argument
    given twice, so the file is refused instead."""
    [problem] = refused(manifest(params={name: 3, "temperature": 0.2}))
    assert problem.startswith("b1.yaml: subject.params") and f"{name}: set by the track" in problem
    judge = {
        "name": "helpfulness", "version": 9, "status": "active", "model": "simjudge/j", "family": "simjudge",
        "rubric": {"id": "helpfulness", "version": 1}, "prompt": "Score it.", "params": {name: 3},
    }  # fmt: skip
    model, problems = validate_model(Judge, judge, "judges/helpfulness-v9.yaml")
    assert model is None and [str(p).split(": set by")[0] for p in problems] == [
        f"judges/helpfulness-v9.yaml: params: {name}"
    ]
